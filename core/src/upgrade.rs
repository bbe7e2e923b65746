//! Protocol upgrades (RFC 9110 §7.8, WebSocket's RFC 6455 §4): a content
//! handler answers 101 Switching Protocols with an [`Upgrade`] in the
//! response's extensions, and after the 101 head is written the engine hands
//! it the client connection. Only Tessera's HTTP/1.1 engine does this; it
//! marks the requests it can upgrade with [`CanUpgrade`] (TLS and HTTP/2 stay
//! on actix-http, where handlers must not answer 101).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use bytes::BytesMut;

/// In a request's extensions when the connection can be handed over after a
/// 101 answer (an `Upgrade` request on Tessera's engine).
#[derive(Debug, Clone, Copy)]
pub struct CanUpgrade;

/// The client's side of an upgraded connection.
pub struct Tunnel {
    /// The client connection.
    pub io: actix_rt::net::TcpStream,
    /// Bytes the client sent after the request head, already read.
    pub read: BytesMut,
}

/// The function that runs on an upgraded connection.
pub type Run = Box<dyn FnOnce(Tunnel) -> Pin<Box<dyn Future<Output = ()>>>>;

/// What runs on the connection after a 101 answer (cloning shares it).
#[derive(Clone)]
pub struct Upgrade(Rc<RefCell<Option<Run>>>);

impl Upgrade {
    /// `run` gets the connection after the 101 head was sent; the connection
    /// closes when its future ends.
    pub fn new<F, Fut>(run: F) -> Self
    where
        F: FnOnce(Tunnel) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        Upgrade(Rc::new(RefCell::new(Some(Box::new(move |t| {
            Box::pin(run(t)) as Pin<Box<dyn Future<Output = ()>>>
        })))))
    }

    /// Takes the function, once.
    pub fn take(&self) -> Option<Run> {
        self.0.borrow_mut().take()
    }
}
