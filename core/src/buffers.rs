//! The buffers of one worker thread: a connection takes one when bytes
//! arrive or a response is written and gives it back when done, so an idle
//! keep-alive connection holds none (h2o and lighttpd pool buffers the same
//! way; actix-http keeps 8 KiB read and write buffers per connection). Back
//! ends take theirs here too (`fastcgi`'s records and answers), so a request
//! costs no allocation for them once the pool is warm.

use std::cell::RefCell;

use bytes::BytesMut;

/// Capacity of a new buffer, bytes (1 KiB, nginx's
/// `client_header_buffer_size`): a typical request head, or a small
/// response's head and body, fits; a larger one grows the buffer, which is
/// kept grown (up to 64 KiB). Under 10,000 busy connections, 1 KiB instead of
/// 4 KiB took Tessera's RSS from 74 to 51 MiB at the same CPU per request.
pub const SIZE: usize = 1024;
/// Larger buffers (a head or a coalesced body that grew past 64 KiB) are
/// freed rather than kept.
const MAX: usize = 64 * 1024;
/// Buffers kept per worker thread (64 KiB of 1 KiB buffers; a burst of
/// 1,000 new connections used to leave 256 per worker behind).
const KEEP: usize = 64;

thread_local! {
    static FREE: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// The largest capacity among the buffers this thread's pool keeps (tests).
#[cfg(test)]
pub(crate) fn largest_kept() -> usize {
    FREE.with(|f| f.borrow().iter().map(BytesMut::capacity).max().unwrap_or(0))
}

/// An empty buffer of at least [`SIZE`] bytes, from this thread's pool or new.
pub fn take() -> BytesMut {
    FREE.with(|f| f.borrow_mut().pop())
        .unwrap_or_else(|| BytesMut::with_capacity(SIZE))
}

/// Returns a buffer for reuse: emptied, its whole capacity reclaimed when no
/// `Bytes` split from it is alive (else a new one takes its place), kept
/// when at most 64 KiB and the pool holds fewer than [`KEEP`].
pub fn give(mut b: BytesMut) {
    if b.capacity() == 0 {
        return;
    }
    b.clear();
    // the front a buffer advanced past is reclaimed here when possible
    b.reserve(SIZE);
    if b.capacity() > MAX {
        return;
    }
    // (a buffer given back while the thread ends is freed)
    let _ = FREE.try_with(|f| {
        let mut f = f.borrow_mut();
        if f.len() < KEEP {
            f.push(b);
        }
    });
}
