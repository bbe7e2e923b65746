//! A file response body that a connection engine may send with `sendfile(2)`
//! instead of reading it into memory (nginx `sendfile on`).
//!
//! static-file builds its body over a [`SendFile`] and puts a clone of the
//! handle in the response's extensions. An engine that can send files (the
//! plain-TCP HTTP/1.1 engine on Linux) calls [`SendFile::offer`], then polls
//! the body once: a file body that sees the offer hands its segments over
//! ([`SendFile::take_handed`]) and ends; a body that a later module replaced
//! ignores the offer and yields its own bytes, which the engine sends as
//! usual. TLS and HTTP/2 never offer, and read the file in chunks.
//!
//! A cached file's prebuilt header lines ([`PrebuiltFields`]) reach the
//! engine beside the response: the handler hands them over with
//! [`set_prebuilt`], and the engine, which polls the request's service
//! future and nothing else in between, takes them after each poll (an
//! entry in the response's extensions map cost an allocation of the map
//! and one of the entry per request, about 600 instructions).

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::rc::Rc;

use bytes::Bytes;
use smallvec::SmallVec;

/// A piece of a file response body.
#[derive(Debug)]
pub enum Segment {
    /// Bytes generated in memory (multipart boundaries and part headers).
    Bytes(Bytes),
    /// `len` bytes of the file from `offset`.
    File {
        /// Offset in bytes.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
}

/// The segments of a body, usually one or three.
pub type Segments = SmallVec<[Segment; 3]>;

/// The bytes `segments` add up to.
pub fn len(segments: &[Segment]) -> u64 {
    segments
        .iter()
        .map(|s| match s {
            Segment::Bytes(b) => b.len() as u64,
            Segment::File { len, .. } => *len,
        })
        .sum()
}

#[derive(Debug)]
struct Parts {
    file: File,
    offered: Cell<bool>,
    handed: RefCell<Option<Segments>>,
    /// The body handed its segments over.
    was_handed: Cell<bool>,
    /// Bytes the engine sent of the handed segments, and their total.
    sent: Cell<u64>,
    total: Cell<u64>,
}

/// The shared handle of one file body (see the module docs). Cloning shares.
#[derive(Debug, Clone)]
pub struct SendFile(Rc<Parts>);

impl SendFile {
    /// A handle for a body of `file`.
    pub fn new(file: File) -> Self {
        SendFile(Rc::new(Parts {
            file,
            offered: Cell::new(false),
            handed: RefCell::new(None),
            was_handed: Cell::new(false),
            sent: Cell::new(0),
            total: Cell::new(0),
        }))
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.0.file
    }

    /// Engine: asks the body to hand its segments over at its next poll.
    pub fn offer(&self) {
        self.0.offered.set(true);
    }

    /// Body: true when the engine offered to send the file itself.
    pub fn offered(&self) -> bool {
        self.0.offered.get()
    }

    /// Body: hands the unsent segments to the engine (then it yields nothing).
    pub fn hand_over(&self, segments: Segments) {
        self.0.total.set(len(&segments));
        self.0.was_handed.set(true);
        *self.0.handed.borrow_mut() = Some(segments);
    }

    /// Engine: the segments the body handed over, if it did.
    pub fn take_handed(&self) -> Option<Segments> {
        self.0.handed.borrow_mut().take()
    }

    /// Engine: `n` more bytes of the handed segments reached the socket.
    pub fn add_sent(&self, n: u64) {
        self.0.sent.set(self.0.sent.get() + n);
    }

    /// Log phase: (bytes sent, bytes handed over) when the engine sent the
    /// body; `None` when the body was polled as usual.
    pub fn engine_sent(&self) -> Option<(u64, u64)> {
        self.0
            .was_handed
            .get()
            .then(|| (self.0.sent.get(), self.0.total.get()))
    }
}

/// Header field lines, `name: value\r\n` each, handed to the engine with
/// [`set_prebuilt`] instead of fields in the response's map when
/// [`crate::Ctx::prebuilt_fields_ok`] allows it (Tessera's HTTP/1.1 engine,
/// no response-phase module). The engine writes them after the map's fields.
///
/// - static-file builds Content-Type, Accept-Ranges, ETag and Last-Modified
///   once per cached file (issue 12: "cached small files keep a prebuilt
///   head block"; h2o and nginx's open-file cache keep such values
///   formatted, not the lines);
/// - proxy passes the upstream's end-to-end fields on as they came (nginx
///   copies them without building a table either), with their names' case.
#[derive(Debug, Clone)]
pub struct PrebuiltFields {
    /// The lines, each ending in CRLF.
    pub lines: Bytes,
    /// The lines hold a `Date` field: the engine adds none.
    pub date: bool,
}

thread_local! {
    /// What [`set_prebuilt`] left for the request being polled on this
    /// thread.
    static PREBUILT: Cell<Option<PrebuiltFields>> = const { Cell::new(None) };
}

/// Content handler: the header lines of the response it returns, for the
/// engine to write after the map's fields. Only where
/// [`crate::Ctx::prebuilt_fields_ok`] allows it, and only for the response
/// the handler then returns (a later call replaces an earlier one).
///
/// The lines belong to the request whose service future is being polled:
/// Tessera's engine puts back what its request left before each poll and
/// takes it after ([`take_prebuilt`]), so requests polled in turn on one
/// worker never see each other's; a request handled on the blocking pool
/// carries them back to its worker.
pub fn set_prebuilt(fields: PrebuiltFields) {
    PREBUILT.set(Some(fields));
}

/// Takes the lines [`set_prebuilt`] left on this thread.
pub(crate) fn take_prebuilt() -> Option<PrebuiltFields> {
    PREBUILT.take()
}

/// Puts back lines taken with [`take_prebuilt`] (or none) before a poll.
pub(crate) fn put_prebuilt(fields: Option<PrebuiltFields>) {
    PREBUILT.set(fields);
}

static ENGINE_SERVES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records, once at start, that the plain-TCP listeners run on Tessera's
/// HTTP/1.1 engine (`http1-engine` is a restart-only setting, so a reloaded
/// configuration may name the other engine).
pub(crate) fn set_engine_serves(yes: bool) {
    ENGINE_SERVES.store(yes, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `req` came through Tessera's HTTP/1.1 engine: a plain-TCP
/// request while the engine serves them (TLS and HTTP/2 are actix-http's).
pub(crate) fn on_engine(req: &actix_web::HttpRequest) -> bool {
    ENGINE_SERVES.load(std::sync::atomic::Ordering::Relaxed) && !req.app_config().secure()
}
