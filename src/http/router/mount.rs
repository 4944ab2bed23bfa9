//! The planes as the router holds them, with the tracer, the lanes and the watcher it answers
//! from: what the capsule builder hands a new router.

use crate::generation::Generation;
use crate::planes::inline::{ReadsInline, RedeemsInline};
use crate::planes::watch::Hub;
use crate::planes::{PeerPlane, ResourcePlane};
use crate::scope::Containment;
use crate::trace::Tracer;
use std::sync::Arc;

/// A plane as the router holds it: the plane `P`, and the same plane as `I`, how it answers on
/// an async worker, when the crate built it.
#[derive(Debug)]
pub(crate) struct Mount<P: ?Sized, I: ?Sized> {
    pub(crate) plane: Arc<P>,
    /// The same plane as [`ReadsInline`] or [`RedeemsInline`], recorded by the capsule builder
    /// for the planes it builds itself; `None` for a runtime's own plane, which is always
    /// awaited on the async worker.
    pub(crate) inline: Option<Arc<I>>,
}

/// The operator plane as mounted.
pub(crate) type FilesMount = Mount<dyn ResourcePlane, dyn ReadsInline>;
/// The peer plane as mounted.
pub(crate) type PeerMount = Mount<dyn PeerPlane, dyn RedeemsInline>;

impl<P: ?Sized, I: ?Sized> Mount<P, I> {
    /// A runtime's own plane: every call awaited on the async worker.
    pub(crate) fn own(plane: Arc<P>) -> Self {
        Mount {
            plane,
            inline: None,
        }
    }
}

impl<P: ?Sized, I: ?Sized> Clone for Mount<P, I> {
    fn clone(&self) -> Self {
        Mount {
            plane: self.plane.clone(),
            inline: self.inline.clone(),
        }
    }
}

/// The planes, the trace and the counter a router answers from.
#[derive(Debug)]
pub(crate) struct Mounted {
    pub(crate) files: Option<FilesMount>,
    pub(crate) peer: Option<PeerMount>,
    pub(crate) tracer: Tracer,
    pub(crate) generation: Generation,
    pub(crate) containment: Containment,
    pub(crate) agent_card: Vec<u8>,
    /// The calls run on the blocking pool at once, shared by every clone of the router.
    pub(crate) lanes: crate::blocking::Lanes,
    /// The path of the card's JSON-RPC URL (its `url`), as a request names it.
    pub(crate) rpc_path: String,
    /// The watcher of the operator plane's root, for long-polls and streams (D-17).
    pub(crate) watch: Option<Arc<Hub>>,
}
