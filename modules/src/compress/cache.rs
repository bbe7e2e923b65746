//! A bounded cache of compressed bodies, so that a hot file is compressed once
//! per version and coding, not once per request.

use std::sync::Mutex;

use bytes::Bytes;
use lru::LruCache;

use super::accept::Coding;

/// Bytes counted per entry on top of the body and key (bookkeeping).
const ENTRY_OVERHEAD: usize = 96;

/// What identifies a compressed body: the request path (after rewrites; with
/// a document root set by a module, that root and the path below it:
/// `Ctx::resource_key`), the response's ETag (which changes with the file) and the coding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    path: Box<str>,
    etag: Box<str>,
    coding: Coding,
}

impl CacheKey {
    /// The key of `path`'s representation with ETag `etag` in `coding`.
    pub fn new(path: &str, etag: &str, coding: Coding) -> CacheKey {
        CacheKey {
            path: path.into(),
            etag: etag.into(),
            coding,
        }
    }

    fn cost(&self, body: &Bytes) -> usize {
        body.len() + self.path.len() + self.etag.len() + ENTRY_OVERHEAD
    }
}

struct Inner {
    lru: LruCache<CacheKey, Bytes>,
    bytes: usize,
}

/// Least-recently-used cache of compressed bodies holding at most `capacity`
/// bytes (bodies, keys and a fixed overhead per entry). One body may take at
/// most a quarter of the capacity. A capacity of 0 disables it.
pub struct CompressedCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

impl CompressedCache {
    /// An empty cache of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        CompressedCache {
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
            capacity,
        }
    }

    /// The largest body stored, in bytes: a quarter of the capacity.
    pub fn entry_limit(&self) -> usize {
        self.capacity / 4
    }

    /// The body stored under `key`, marking it recently used.
    pub fn get(&self, key: &CacheKey) -> Option<Bytes> {
        if self.capacity == 0 {
            return None;
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.lru.get(key).cloned()
    }

    /// Stores `body` under `key`, evicting least recently used entries to stay
    /// within the capacity. Bodies above [`Self::entry_limit`] are not stored.
    pub fn insert(&self, key: CacheKey, body: Bytes) {
        if body.len() > self.entry_limit() {
            return;
        }
        let cost = key.cost(&body);
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = g.lru.peek(&key) {
            let old_cost = key.cost(old);
            g.bytes -= old_cost;
        }
        g.lru.put(key, body);
        g.bytes += cost;
        while g.bytes > self.capacity {
            match g.lru.pop_lru() {
                Some((k, b)) => {
                    let c = k.cost(&b);
                    g.bytes -= c;
                }
                None => break,
            }
        }
    }

    /// Bytes accounted for (bodies, keys, overhead).
    pub fn used(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lru
            .len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(p: &str) -> CacheKey {
        CacheKey::new(p, "\"e\"", Coding::Gzip)
    }

    #[test]
    fn bounded_lru() {
        let c = CompressedCache::new(4000);
        let body = Bytes::from(vec![0u8; 900]);
        for i in 0..10 {
            c.insert(k(&format!("/{i}")), body.clone());
            assert!(c.used() <= 4000, "{}", c.used());
        }
        assert!(c.len() < 10 && !c.is_empty());
        assert!(c.get(&k("/9")).is_some());
        assert!(c.get(&k("/0")).is_none(), "oldest evicted");
        // a hit keeps an entry alive
        let c = CompressedCache::new(4000);
        let body = Bytes::from(vec![0u8; 950]);
        for p in ["/a", "/b", "/c"] {
            c.insert(k(p), body.clone());
        }
        assert_eq!(c.len(), 3);
        assert!(c.get(&k("/a")).is_some());
        c.insert(k("/d"), body.clone());
        assert!(c.get(&k("/a")).is_some());
        assert!(c.get(&k("/b")).is_none());
        assert!(c.get(&k("/c")).is_some() && c.get(&k("/d")).is_some());
    }

    #[test]
    fn keys_differ_by_etag_and_coding_and_replace() {
        let c = CompressedCache::new(1 << 20);
        c.insert(
            CacheKey::new("/x", "\"1\"", Coding::Gzip),
            Bytes::from_static(b"g"),
        );
        c.insert(
            CacheKey::new("/x", "\"1\"", Coding::Br),
            Bytes::from_static(b"b"),
        );
        c.insert(
            CacheKey::new("/x", "\"2\"", Coding::Gzip),
            Bytes::from_static(b"2"),
        );
        assert_eq!(c.len(), 3);
        assert_eq!(
            c.get(&CacheKey::new("/x", "\"1\"", Coding::Br)).as_deref(),
            Some(&b"b"[..])
        );
        let before = c.used();
        c.insert(
            CacheKey::new("/x", "\"2\"", Coding::Gzip),
            Bytes::from_static(b"3"),
        );
        assert_eq!(c.used(), before);
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn limits() {
        let c = CompressedCache::new(4000);
        c.insert(k("/big"), Bytes::from(vec![0u8; 1001]));
        assert!(c.is_empty(), "above a quarter of the capacity");
        let off = CompressedCache::new(0);
        off.insert(k("/a"), Bytes::from_static(b"x"));
        assert!(off.get(&k("/a")).is_none());
    }
}
