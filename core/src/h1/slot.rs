//! Pooled heap room for the future of one request in progress.
//!
//! A connection's task holds only what an idle keep-alive connection needs
//! (the socket, the keep-alive timer, the shutdown signal: a few hundred
//! bytes). The state of a request in progress (the parsed head, the app's
//! future, the response writer: about 2 KiB) lives in a [`Slot`] while the
//! request runs, and its room goes back to this worker's pool when it is
//! done, as nginx frees a request's pool and h2o its request when a
//! keep-alive connection goes idle. Once the pool is warm a request costs no
//! allocation for it.

#![allow(unsafe_code)] // a future written into, pinned in and dropped from pooled raw memory

use std::alloc::Layout;
use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// Blocks kept per worker thread (64: a few hundred KiB at most).
const KEEP: usize = 64;

/// Room for one future, of the layout it was allocated with.
struct Block {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Block {
    fn new(layout: Layout) -> Block {
        // SAFETY: the layout's size is not zero (checked by `Slot::new`).
        let ptr = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(ptr) else {
            std::alloc::handle_alloc_error(layout)
        };
        Block { ptr, layout }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `Block::new` with this layout, and whatever
        // was stored in it has been dropped (`Slot` does so before it gives
        // the block back).
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

thread_local! {
    static FREE: RefCell<Vec<Block>> = const { RefCell::new(Vec::new()) };
}

/// A future stored in a block of this thread's pool; it gives the block back
/// when dropped (finished or not). Like `Box::pin(f)`, without an allocation
/// once the pool holds a block of `F`'s layout.
pub(super) struct Slot<F: Future> {
    block: Option<Block>,
    // owns an `F` (drop check)
    _f: PhantomData<F>,
}

impl<F: Future> Slot<F> {
    /// Moves `f` into a pooled block (a new one when the pool has none of
    /// its layout).
    #[cfg(test)]
    fn new(f: F) -> Self {
        Self::new_with(|| f)
    }

    /// Makes the future with `make` and stores it in a pooled block (a new
    /// one when the pool has none of its layout). Made after the block is
    /// at hand, the future can be written straight into it: `new(f)` copies
    /// the whole of `F`'s layout (a request future's, about 2 KB) from the
    /// stack.
    #[inline(always)]
    pub(super) fn new_with(make: impl FnOnce() -> F) -> Self {
        let layout = const {
            let l = Layout::new::<F>();
            assert!(l.size() > 0, "a future with state");
            l
        };
        let block = FREE
            .try_with(|free| {
                let mut free = free.borrow_mut();
                match free.pop() {
                    Some(b) if b.layout == layout => Some(b),
                    // another layout (the engine puts only its request
                    // future in slots): freed
                    _ => None,
                }
            })
            .ok()
            .flatten()
            .unwrap_or_else(|| Block::new(layout));
        // SAFETY: the block has `F`'s layout and holds nothing.
        unsafe { block.ptr.cast::<F>().as_ptr().write(make()) };
        Slot {
            block: Some(block),
            _f: PhantomData,
        }
    }
}

// The future never moves: it stays in its block until it is dropped there.
impl<F: Future> Unpin for Slot<F> {}

impl<F: Future> Future for Slot<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(b) = &self.block else {
            unreachable!("a slot holds its block until dropped")
        };
        // SAFETY: the block holds an `F`, written in `new` and dropped only
        // in `drop`; it is never moved out of the block (pinned in place).
        unsafe { Pin::new_unchecked(&mut *b.ptr.cast::<F>().as_ptr()) }.poll(cx)
    }
}

impl<F: Future> Drop for Slot<F> {
    fn drop(&mut self) {
        let Some(b) = self.block.take() else { return };
        // The block goes back even when the future's drop panics.
        struct Back(Option<Block>);
        impl Drop for Back {
            fn drop(&mut self) {
                let Some(b) = self.0.take() else { return };
                let _ = FREE.try_with(|free| {
                    let mut free = free.borrow_mut();
                    if free.len() < KEEP {
                        free.push(b);
                    }
                    // else `b` drops here: freed
                });
            }
        }
        let ptr = b.ptr.cast::<F>().as_ptr();
        let _back = Back(Some(b));
        // SAFETY: the block holds an `F` (see `poll`), dropped exactly once.
        unsafe { std::ptr::drop_in_place(ptr) };
    }
}

#[cfg(test)]
mod tests {
    use super::Slot;
    use std::cell::Cell;
    use std::future::Future;
    use std::pin::Pin;
    use std::rc::Rc;
    use std::task::{Context, Poll, Waker};

    /// A future that is pending once, then ready with its value; counts its
    /// drops.
    struct Once {
        value: u64,
        polled: bool,
        drops: Rc<Cell<u32>>,
        _room: [u64; 64],
    }

    impl Future for Once {
        type Output = u64;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
            if self.polled {
                Poll::Ready(self.value)
            } else {
                self.polled = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    impl Drop for Once {
        fn drop(&mut self) {
            self.drops.set(self.drops.get() + 1);
        }
    }

    fn once(value: u64, drops: &Rc<Cell<u32>>) -> Once {
        Once {
            value,
            polled: false,
            drops: drops.clone(),
            _room: [value; 64],
        }
    }

    fn address<F: Future>(s: &Slot<F>) -> usize {
        s.block.as_ref().map_or(0, |b| b.ptr.as_ptr() as usize)
    }

    #[test]
    fn a_slot_runs_its_future_and_drops_it_once() {
        let drops = Rc::new(Cell::new(0));
        let mut s = Slot::new(once(7, &drops));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Pending);
        assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Ready(7));
        assert_eq!(drops.get(), 0);
        drop(s);
        assert_eq!(drops.get(), 1);
        // dropped before it finished: dropped too
        drop(Slot::new(once(8, &drops)));
        assert_eq!(drops.get(), 2);
    }

    #[test]
    fn the_next_slot_reuses_the_block_of_the_last() {
        let drops = Rc::new(Cell::new(0));
        let a = Slot::new(once(1, &drops));
        let first = address(&a);
        drop(a);
        let b = Slot::new(once(2, &drops));
        assert_eq!(address(&b), first, "no new allocation");
        // two at once need two blocks
        let c = Slot::new(once(3, &drops));
        assert_ne!(address(&c), first);
    }

    #[test]
    fn a_block_of_another_layout_is_not_reused() {
        type Small = std::future::Ready<[u8; 3]>;
        let drops = Rc::new(Cell::new(0));
        // the pool's top block now has `Once`'s layout
        drop(Slot::new(once(1, &drops)));
        let mut small = Slot::new(std::future::ready([0u8; 3]));
        let layout = small.block.as_ref().map(|b| b.layout);
        assert_eq!(layout, Some(std::alloc::Layout::new::<Small>()));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(Pin::new(&mut small).poll(&mut cx), Poll::Ready([0; 3]));
    }
}
