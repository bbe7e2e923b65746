//! Compressing response bodies: whole buffers in memory, and streamed bodies
//! chunk by chunk.

use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tessera_core::actix_web::body::{BodySize, BoxBody, MessageBody};

use super::accept::Coding;
use super::cache::{CacheKey, CompressedCache};

/// Compression levels per coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levels {
    /// gzip level, 1 (fastest) to 9 (smallest).
    pub gzip: u32,
    /// Brotli quality, 0 to 11.
    pub brotli: u32,
    /// zstd level, 1 to 19.
    pub zstd: i32,
}

/// Brotli window: 2^22 bytes (4 MiB), the encoder's default.
const BROTLI_LGWIN: u32 = 22;
/// Brotli's internal buffer, bytes.
const BROTLI_BUFFER: usize = 16 * 1024;

/// A streaming encoder writing into a `Vec` that the caller drains.
pub enum Encoder {
    /// gzip (flate2, miniz_oxide backend).
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    /// Brotli.
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
    /// Zstandard.
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Encoder {
    /// A new encoder for `coding` at `levels`.
    ///
    /// # Errors
    /// When zstd cannot allocate its context.
    pub fn new(coding: Coding, levels: Levels) -> std::io::Result<Encoder> {
        Ok(match coding {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(levels.gzip),
            )),
            Coding::Br => Encoder::Br(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                BROTLI_BUFFER,
                levels.brotli,
                BROTLI_LGWIN,
            ))),
            Coding::Zstd => {
                Encoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), levels.zstd)?)
            }
        })
    }

    /// Feeds `data` to the encoder.
    ///
    /// # Errors
    /// An encoder error (writing to a `Vec` does not fail otherwise).
    pub fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.write_all(data),
            Encoder::Br(e) => e.write_all(data),
            Encoder::Zstd(e) => e.write_all(data),
        }
    }

    /// Takes the compressed bytes produced so far.
    pub fn take(&mut self) -> Vec<u8> {
        match self {
            Encoder::Gzip(e) => std::mem::take(e.get_mut()),
            Encoder::Br(e) => std::mem::take(e.get_mut()),
            Encoder::Zstd(e) => std::mem::take(e.get_mut()),
        }
    }

    /// Ends the stream and returns the remaining compressed bytes.
    ///
    /// # Errors
    /// An encoder error.
    pub fn finish(self) -> std::io::Result<Vec<u8>> {
        match self {
            Encoder::Gzip(e) => e.finish(),
            Encoder::Br(e) => Ok(e.into_inner()),
            Encoder::Zstd(e) => e.finish(),
        }
    }
}

/// Compresses a whole buffer.
///
/// # Errors
/// An encoder error.
pub fn compress(data: &[u8], coding: Coding, levels: Levels) -> std::io::Result<Vec<u8>> {
    if coding == Coding::Zstd {
        return zstd::bulk::compress(data, levels.zstd);
    }
    let mut e = Encoder::new(coding, levels)?;
    e.write(data)?;
    let mut out = e.take();
    out.extend_from_slice(&e.finish()?);
    Ok(out)
}

/// Where a streamed body's complete output goes once the stream ends.
pub struct CacheFill {
    /// The cache.
    pub cache: Arc<CompressedCache>,
    /// The entry's key.
    pub key: CacheKey,
    /// Output collected so far; dropped (and nothing cached) once it passes
    /// the cache's entry limit.
    pub collected: Option<Vec<u8>>,
}

/// A response body compressed as it streams (length unknown up front, so it is
/// sent chunked). Used for bodies that are not one in-memory buffer (files
/// above 128 KiB).
pub struct EncodedBody {
    inner: BoxBody,
    encoder: Option<Encoder>,
    fill: Option<CacheFill>,
}

impl EncodedBody {
    /// Wraps `inner`; `fill` stores the complete output in a cache.
    pub fn new(inner: BoxBody, encoder: Encoder, fill: Option<CacheFill>) -> Self {
        EncodedBody {
            inner,
            encoder: Some(encoder),
            fill,
        }
    }

    fn collect(&mut self, out: &[u8]) {
        if let Some(f) = &mut self.fill {
            if let Some(c) = &mut f.collected {
                if c.len() + out.len() > f.cache.entry_limit() {
                    f.collected = None;
                } else {
                    c.extend_from_slice(out);
                }
            }
        }
    }
}

impl MessageBody for EncodedBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        BodySize::Stream
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.get_mut();
        loop {
            let Some(enc) = this.encoder.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => {
                    this.encoder = None;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(Some(Ok(chunk))) => {
                    if let Err(e) = enc.write(&chunk) {
                        this.encoder = None;
                        return Poll::Ready(Some(Err(e.into())));
                    }
                    let out = enc.take();
                    if !out.is_empty() {
                        this.collect(&out);
                        return Poll::Ready(Some(Ok(Bytes::from(out))));
                    }
                }
                Poll::Ready(None) => {
                    let enc = this.encoder.take().expect("checked above");
                    let out = match enc.finish() {
                        Ok(o) => o,
                        Err(e) => return Poll::Ready(Some(Err(e.into()))),
                    };
                    this.collect(&out);
                    if let Some(f) = this.fill.take() {
                        if let Some(all) = f.collected {
                            f.cache.insert(f.key, Bytes::from(all));
                        }
                    }
                    return Poll::Ready((!out.is_empty()).then(|| Ok(Bytes::from(out))));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    const LEVELS: Levels = Levels {
        gzip: 6,
        brotli: 5,
        zstd: 3,
    };

    pub(crate) fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match coding {
            Coding::Gzip => {
                flate2::read::GzDecoder::new(data)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Br => {
                brotli::Decompressor::new(data, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Zstd => {
                out = zstd::stream::decode_all(data).unwrap();
            }
        }
        out
    }

    #[test]
    fn round_trips() {
        let text = b"hello, hello, hello world\n".repeat(500);
        for c in [Coding::Gzip, Coding::Br, Coding::Zstd] {
            let z = compress(&text, c, LEVELS).unwrap();
            assert!(z.len() < text.len() / 4, "{c:?}: {}", z.len());
            assert_eq!(decode(c, &z), text, "{c:?}");
            assert_eq!(decode(c, &compress(b"", c, LEVELS).unwrap()), b"", "{c:?}");
        }
    }

    #[test]
    fn streaming_matches_input_and_fills_cache() {
        let text: Vec<u8> = (0..300_000u32)
            .map(|i| b"abcdefgh"[(i % 7) as usize])
            .collect();
        for c in [Coding::Gzip, Coding::Br, Coding::Zstd] {
            let cache = Arc::new(CompressedCache::new(1 << 20));
            let key = CacheKey::new("/x", "\"t\"", c);
            let chunks: Vec<Bytes> = text.chunks(100_000).map(Bytes::copy_from_slice).collect();
            let inner = BoxBody::new(futures_stream(chunks));
            let mut body = EncodedBody::new(
                inner,
                Encoder::new(c, LEVELS).unwrap(),
                Some(CacheFill {
                    cache: Arc::clone(&cache),
                    key: key.clone(),
                    collected: Some(Vec::new()),
                }),
            );
            let mut out = Vec::new();
            let waker = std::task::Waker::from(Arc::new(NoopWake));
            let mut cx = Context::from_waker(&waker);
            for _ in 0..10_000 {
                match Pin::new(&mut body).poll_next(&mut cx) {
                    Poll::Ready(Some(Ok(b))) => out.extend_from_slice(&b),
                    Poll::Ready(None) => break,
                    other => panic!("{c:?}: {:?}", other.map(|o| o.map(|r| r.is_ok()))),
                }
            }
            assert_eq!(decode(c, &out), text, "{c:?}");
            assert_eq!(cache.get(&key).as_deref(), Some(&out[..]), "{c:?}");
        }
    }

    struct NoopWake;
    impl std::task::Wake for NoopWake {
        fn wake(self: Arc<Self>) {}
    }

    /// A body yielding `chunks` one per poll, never pending.
    fn futures_stream(chunks: Vec<Bytes>) -> impl MessageBody {
        struct S(std::collections::VecDeque<Bytes>, u64);
        impl MessageBody for S {
            type Error = std::io::Error;
            fn size(&self) -> BodySize {
                BodySize::Sized(self.1)
            }
            fn poll_next(
                self: Pin<&mut Self>,
                _cx: &mut Context<'_>,
            ) -> Poll<Option<Result<Bytes, Self::Error>>> {
                Poll::Ready(self.get_mut().0.pop_front().map(Ok))
            }
        }
        let len = chunks.iter().map(|c| c.len() as u64).sum();
        S(chunks.into(), len)
    }
}
