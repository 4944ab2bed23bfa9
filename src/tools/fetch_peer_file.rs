//! `fetch-peer-file` (D-10): token shape → `peer_fetch.allow` (before any connection) → redeem
//! over HTTP(S) asserting our own audience → etag check → land under `peer-in/` by temp file,
//! fsync and rename. What was fetched reaches the agent as a landed file, never inline.
//!
//! A fetcher with an identity key (D-14.1) sends beside its audience one `x-murmur-proof`
//! signed for this handle, now, with a fresh nonce, naming the origin the redeem is sent to
//! (D-14.3, D-14.3.1), on every redeem: a minter that does not know proofs ignores the header,
//! and a peer that relays the proof to another minter gets it refused there.

use super::call::{DEADLINE_MESSAGE, SessionEnd, within};
use super::traced::CallLine;
use super::{
    CallOptions, SCHEMA_DIALECT, Tool, ToolError, ToolErrorCode, ToolFuture, checked_text,
    json_object, json_text,
};
use crate::backends::{Clock, Filesystem, IdentityKey, OsRandom, Random};
use crate::events::PeerFileFetch;
use crate::http::client::{Credentials, PeerClient, PeerTimeouts, RedeemError, Redeemed};
use crate::planes::{Origin, handle};
use crate::policy::{Address, AllowList, PeerUrl};
use crate::refusal::Code;
use crate::trace::Tracer;
use http::header::HeaderValue;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// The directory fetched files land in, under the workdir.
pub const LANDING_DIR: &str = "peer-in";
/// The longest sanitised basename kept.
const MAX_BASENAME: usize = 120;

/// `fetch-peer-file`: redeems a peer's handle and stores the bytes as a file. Registered only
/// when the manifest declares `capabilities.peer_fetch` (D-12).
///
/// **Where the file lands** (D-10.4): `peer-in/<handle_id>-<basename>` under the workdir,
/// [`LANDING_DIR`] being `peer-in`, `handle_id` the first 16 hex of sha256(handle), and the
/// basename the last `/`-separated part of the handle payload's (unverified) `p`, as
/// [`sanitised_basename`] cleans it: each character outside `[A-Za-z0-9._-]` becomes `_`, the
/// result is cut to 120 characters, and it is `file` when empty, `.`, `..` or when the payload
/// does not decode. A handle from `out/Q3 report.md` lands as
/// `peer-in/1eceb5b4b9d1215b-Q3_report.md`. The file is written to a temporary file, fsynced
/// and renamed over that name (a second fetch of the same handle replaces it); no symlink is
/// followed on the way (`path_refused`). The result names the file, its size and sha256; the
/// bytes never appear in it.
///
/// Refusal codes: `invalid_input`, `malformed_handle`, `peer_not_allowed`,
/// `peer_unreachable`, the peer's own refusal code or `http_<status>`
/// ([`ToolErrorCode::Peer`], [`ToolErrorCode::Http`]), `too_large`, `etag_mismatch`,
/// `path_refused`, `io_error` (landing, the trace (D-6.4), a deadline), and `session_ended`
/// once the capsule's session has ended ([`Capsule::end_session`](crate::Capsule::end_session),
/// D-12.1): such a call does nothing and writes no trace line, and a redeem whose proof the
/// session's end overtakes (the identity key is gone) fails the same way.
///
/// ```
/// use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::refusal::Code;
/// use resource_plane::tools::{FetchPeerFile, FetchPeerFileInput, Tool};
/// use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manifest = Manifest::from_yaml(
///     "name: reader\ncapabilities: { peer_fetch: { allow: [\"127.0.0.1:41234\"] } }",
/// ).unwrap().manifest;
/// let trace = Arc::new(RecordingTraceSink::new());
/// let capsule = Capsule::launch(
///     &manifest,
///     CapsuleConfig::new("http://127.0.0.1:41235").unwrap(),
///     Backends {
///         fs: Arc::new(MemoryFilesystem::new()),
///         clock: Arc::new(ManualClock::new(0)),
///         keys: None,
///         trace: trace.clone(),
///     },
/// ).unwrap();
/// let fetch = capsule.tools().typed::<FetchPeerFile>().expect("peer_fetch grants it");
/// assert_eq!(fetch.output_schema()["required"][0], "path");
///
/// // Not a token: refused before any connection, with its one trace line.
/// let input = FetchPeerFileInput::new("127.0.0.1:41234", "not-a-token");
/// assert_eq!(fetch.fetch(input).await.unwrap_err().code, Code::MalformedHandle);
/// // A peer outside capabilities.peer_fetch.allow is never contacted.
/// let input = FetchPeerFileInput::new("198.51.100.7:80", "mh1.eyJ2IjoxfQ.QUJD");
/// assert_eq!(fetch.fetch(input).await.unwrap_err().code, Code::PeerNotAllowed);
/// let outcomes: Vec<_> = trace.events().iter().map(|e| e["outcome"].clone()).collect();
/// assert_eq!(outcomes, ["malformed_handle", "peer_not_allowed"]);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct FetchPeerFile {
    allow: AllowList,
    client: PeerClient,
    fs: Arc<dyn Filesystem>,
    tracer: Tracer,
    own_audience: String,
    max_bytes: u64,
    timeouts: PeerTimeouts,
    identity: Option<(Arc<dyn IdentityKey>, Arc<dyn Clock>)>,
    /// Where each proof's nonce comes from.
    random: Arc<dyn Random>,
    /// Raised when the capsule's session ends.
    ended: SessionEnd,
}

/// A refusal of this tool: a code (maybe the peer's own), its public message and trace detail.
struct Failure {
    code: ToolErrorCode,
    message: String,
    reason: String,
}

impl Failure {
    fn of(code: Code, reason: impl Into<String>) -> Self {
        Failure {
            code: ToolErrorCode::Code(code),
            message: code.message().into(),
            reason: reason.into(),
        }
    }
}

/// A body received and checked, ready to land.
struct Received {
    /// The file's name in the landing directory.
    name: String,
    redeemed: Redeemed,
}

struct Landed {
    /// The file's name in the landing directory.
    name: String,
    stored_path: String,
    bytes: u64,
    sha256: String,
    generation: Option<u64>,
}

impl FetchPeerFile {
    /// The tool, asserting `own_audience`, accepting at most `max_bytes`.
    pub(crate) fn new(
        allow: AllowList,
        client: PeerClient,
        fs: Arc<dyn Filesystem>,
        tracer: Tracer,
        own_audience: String,
        max_bytes: u64,
        timeouts: PeerTimeouts,
    ) -> Self {
        FetchPeerFile {
            allow,
            client,
            fs,
            tracer,
            own_audience,
            max_bytes,
            timeouts,
            identity: None,
            random: Arc::new(OsRandom),
            ended: SessionEnd::default(),
        }
    }

    /// The same tool refusing every call with `session_ended` once `ended` is raised.
    pub(crate) fn ending_with(mut self, ended: SessionEnd) -> Self {
        self.ended = ended;
        self
    }

    /// The same tool drawing each proof's nonce from `random` instead of the OS source.
    pub(crate) fn with_random(mut self, random: Arc<dyn Random>) -> Self {
        self.random = random;
        self
    }

    /// The same tool proving its redeems with `identity`, the key its card publishes, each
    /// proof stamped with `clock`'s time (D-14.3).
    pub(crate) fn with_identity(
        mut self,
        identity: Arc<dyn IdentityKey>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        self.identity = Some((identity, clock));
        self
    }

    /// The `x-murmur-proof` value for a redeem of `handle_id` sent to `peer` now, when this
    /// fetcher has a key. It names `peer`'s origin, so only the minter there accepts it.
    ///
    /// # Errors
    /// `session_ended` once the session has ended and the key is gone.
    fn proof_header(
        &self,
        peer: &Address,
        handle_id: &str,
    ) -> Result<Option<HeaderValue>, Failure> {
        let Some((identity, clock)) = &self.identity else {
            return Ok(None);
        };
        let value = crate::planes::proof::header_value(
            identity.as_ref(),
            &Origin::of_address(peer),
            handle_id,
            clock.now_ms(),
            &self.random.bytes::<{ crate::planes::proof::NONCE_BYTES }>(),
        )
        .ok_or_else(|| {
            Failure::of(
                Code::SessionEnded,
                "the session has ended; the identity key is gone",
            )
        })?;
        HeaderValue::from_str(&value)
            .map(Some)
            .map_err(|_| Failure::of(Code::IoError, "the proof is not a header value"))
    }

    /// Redeems `input`'s handle at its peer and lands the file (D-10), without a deadline.
    ///
    /// # Errors
    /// See [`FetchPeerFile`].
    pub async fn fetch(&self, input: FetchPeerFileInput) -> Result<FetchPeerFileOutput, ToolError> {
        self.fetch_with(input, CallOptions::default()).await
    }

    /// Redeems `input`'s handle at its peer and lands the file (D-10), with `options`. A
    /// deadline bounds the wait on the peer; a body already received and checked is landed.
    ///
    /// # Errors
    /// See [`FetchPeerFile`].
    pub async fn fetch_with(
        &self,
        input: FetchPeerFileInput,
        options: CallOptions,
    ) -> Result<FetchPeerFileOutput, ToolError> {
        if self.ended.ended() {
            return Err(ToolError::of(Code::SessionEnded));
        }
        let peer_text = checked_text(&input.peer, "peer")?;
        let token = checked_text(&input.handle, "handle")?;
        let handle_id = crate::hex::handle_id(&token);
        let deadline = options.deadline();
        let (owed_peer, owed_handle_id) = (peer_text.clone(), handle_id.clone());
        let line = CallLine::owe(self.name(), &self.tracer, move || {
            let unfinished = Failure::of(Code::IoError, options.unfinished_reason());
            fetch_line(owed_peer, owed_handle_id, Err(&unfinished))
        });
        let outcome = self
            .receive_and_land(&peer_text, &token, &handle_id, deadline)
            .await;
        let written = line.write(&fetch_line(peer_text.clone(), handle_id, outcome.as_ref()));
        if let Err(refused) = written {
            // Fail closed (D-6.4): bytes the trace cannot record do not stay in the workdir.
            if let Ok(landed) = outcome {
                self.unland(landed).await;
            }
            return Err(refused);
        }
        match outcome {
            Ok(landed) => Ok(FetchPeerFileOutput {
                path: landed.stored_path,
                bytes: landed.bytes,
                sha256: landed.sha256,
                generation: landed.generation,
                peer: peer_text,
            }),
            Err(failure) => Err(ToolError::new(failure.code, failure.message)),
        }
    }

    /// Receives the file within `deadline`, then lands it: a body received and checked is
    /// landed even when the deadline passes during the landing.
    async fn receive_and_land(
        &self,
        peer_text: &str,
        token: &str,
        handle_id: &str,
        deadline: Option<std::time::Duration>,
    ) -> Result<Landed, Failure> {
        match within(deadline, self.receive(peer_text, token, handle_id)).await {
            Ok(Ok(received)) => self.land(received).await,
            Ok(Err(failure)) => Err(failure),
            Err(expired) => Err(Failure {
                code: ToolErrorCode::Code(Code::IoError),
                message: DEADLINE_MESSAGE.into(),
                reason: expired.reason(),
            }),
        }
    }

    /// Removes a landed file whose trace line could not be written.
    async fn unland(&self, landed: Landed) {
        let fs = self.fs.clone();
        let removed = crate::blocking::run(move || fs.unland(LANDING_DIR, &landed.name)).await;
        if !matches!(removed, Ok(Ok(()))) {
            tracing::error!("the fetched file stays, untraced: it could not be removed");
        }
    }

    /// The JSON call: the input read into its typed form, then [`fetch_with`](Self::fetch_with).
    async fn run(&self, input: Value, options: CallOptions) -> Result<Value, ToolError> {
        let input = FetchPeerFileInput::from_json(&input)?;
        let output = self.fetch_with(input, options).await?;
        Ok(serde_json::to_value(output).expect("strings and integers always serialise"))
    }

    /// Everything up to landing: token shape → allow → redeem → etag (D-10.1 to D-10.3).
    async fn receive(
        &self,
        peer_text: &str,
        token: &str,
        handle_id: &str,
    ) -> Result<Received, Failure> {
        if !handle::has_token_shape(token) {
            return Err(Failure::of(
                Code::MalformedHandle,
                "the handle is not an mh1 token",
            ));
        }
        let peer_url = PeerUrl::parse(peer_text).map_err(|accepted| {
            Failure::of(Code::PeerNotAllowed, format!("the peer must be {accepted}"))
        })?;
        let peer = &peer_url.address;
        if !self.allow.admits(peer) {
            return Err(Failure::of(
                Code::PeerNotAllowed,
                format!("{peer} is not in capabilities.peer_fetch.allow"),
            ));
        }
        let audience = HeaderValue::from_str(&self.own_audience)
            .map_err(|_| Failure::of(Code::IoError, "own audience is not a header value"))?;
        let credentials = Credentials {
            audience,
            proof: self.proof_header(peer, handle_id)?,
        };
        let redeemed = self
            .client
            .redeem(&peer_url, token, credentials, self.timeouts, self.max_bytes)
            .await
            .map_err(|e| self.failure_of(e))?;
        let name = format!(
            "{handle_id}-{}",
            sanitised_basename(handle::unverified_path(token).as_deref())
        );
        Ok(Received { name, redeemed })
    }

    /// A redeem's failure as this tool reports it (D-10.2, D-10.3).
    fn failure_of(&self, error: RedeemError) -> Failure {
        match error {
            RedeemError::Unreachable(why) => Failure::of(Code::PeerUnreachable, why),
            RedeemError::TooLarge => Failure::of(
                Code::TooLarge,
                format!(
                    "the body exceeds the fetcher's limit of {} bytes",
                    self.max_bytes
                ),
            ),
            RedeemError::Refused { status, code } => peer_refusal(status, code.as_deref()),
            RedeemError::EtagMismatch => Failure::of(
                Code::EtagMismatch,
                "the etag does not match the body's sha256",
            ),
        }
    }

    /// Lands a received body under [`LANDING_DIR`] (D-10.4): temp file, fsync, rename.
    async fn land(&self, received: Received) -> Result<Landed, Failure> {
        let Received { name, redeemed } = received;
        let fs = self.fs.clone();
        let body = redeemed.body.clone();
        let landing_name = name.clone();
        crate::blocking::run(move || fs.land(LANDING_DIR, &landing_name, &body))
            .await
            .map_err(|e| Failure::of(Code::IoError, format!("landing task failed: {e}")))?
            .map_err(|e| {
                let refusal: crate::refusal::Refusal = e.into();
                Failure::of(refusal.code, refusal.reason)
            })?;
        Ok(Landed {
            stored_path: format!("{LANDING_DIR}/{name}"),
            name,
            bytes: redeemed.body.len() as u64,
            sha256: redeemed.sha256,
            generation: redeemed.generation,
        })
    }
}

/// The outcome for a non-200 answer: the peer's code when its body named one by the wire's
/// grammar ([`ToolErrorCode::peer`]), else `http_<status>` (D-10.3).
fn peer_refusal(status: u16, code: Option<&str>) -> Failure {
    match code.and_then(ToolErrorCode::peer) {
        Some(code) => Failure {
            message: format!("the peer refused the handle: {code}"),
            reason: format!("peer answered HTTP {status} with {code}"),
            code,
        },
        None => Failure {
            code: ToolErrorCode::Http(status),
            message: format!("the peer answered HTTP {status}"),
            reason: format!("peer answered HTTP {status} without an error code"),
        },
    }
}

/// The call's trace line (D-6.2): `peer_file_fetch` naming the landed file, or the failure.
fn fetch_line(
    peer: String,
    handle_id: String,
    outcome: Result<&Landed, &Failure>,
) -> PeerFileFetch {
    match outcome {
        Ok(landed) => PeerFileFetch {
            peer: Some(peer),
            handle_id: Some(handle_id),
            stored_path: Some(landed.stored_path.clone()),
            bytes: Some(landed.bytes),
            sha256: Some(landed.sha256.clone()),
            outcome: "ok".into(),
            reason: None,
        },
        Err(failure) => PeerFileFetch {
            peer: Some(peer),
            handle_id: Some(handle_id),
            stored_path: None,
            bytes: None,
            sha256: None,
            outcome: failure.code.to_string(),
            reason: Some(failure.reason.clone()),
        },
    }
}

/// The basename of `p` with every character outside `[A-Za-z0-9._-]` replaced by `_`, cut to
/// 120 characters; `file` when absent, empty, `.` or `..` (D-10.4). A fetched file lands at
/// `peer-in/<handle_id>-<this>`, so whatever name a peer's handle carries, it lands as one
/// plain name inside `peer-in/`.
///
/// ```
/// use resource_plane::tools::sanitised_basename;
///
/// assert_eq!(sanitised_basename(Some("reports/q3 final.md")), "q3_final.md");
/// assert_eq!(sanitised_basename(Some("..")), "file");
/// assert_eq!(sanitised_basename(None), "file");
/// assert_eq!(sanitised_basename(Some(&"a".repeat(300))).len(), 120);
/// ```
pub fn sanitised_basename(p: Option<&str>) -> String {
    let base = p.and_then(|p| p.rsplit('/').next()).unwrap_or("");
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_BASENAME)
        .collect();
    match clean.as_str() {
        "" | "." | ".." => "file".into(),
        _ => clean,
    }
}

impl Tool for FetchPeerFile {
    fn name(&self) -> &'static str {
        "fetch-peer-file"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        FetchPeerFileInput::json_schema()
    }

    fn output_schema(&self) -> Value {
        FetchPeerFileOutput::json_schema()
    }

    fn call_with(&self, input: Value, options: CallOptions) -> ToolFuture<'_> {
        Box::pin(self.run(input, options))
    }
}

/// What the model reads about `fetch-peer-file`.
const DESCRIPTION: &str = "Fetch a file another capsule shared with you. Redeems the handle \
(an `mh1.` token) that peer gave you, at that peer, and stores the file in your workdir as \
`peer-in/<handle_id>-<name>`. Returns that path, the file's size in bytes, its sha256, the \
peer's generation and the peer; never the file's contents: read the file at the returned path \
when you need them. Use this when a peer has given you a handle. `peer` is the capsule that \
gave it (`host:port` or its http(s) URL); `handle` is the token exactly as given. It contacts \
only peers that capabilities.peer_fetch.allow admits, follows no redirect, stores nothing \
whose sha256 does not match the peer's etag, and writes nowhere but `peer-in/`.";

/// The input of `fetch-peer-file` (D-10.1). Unknown fields are ignored, as the JSON call
/// ignores them. Its `Debug` names the handle by `handle_id` only.
///
/// ```
/// use resource_plane::tools::FetchPeerFileInput;
///
/// let input = FetchPeerFileInput::new("127.0.0.1:41234", "mh1.eyJ2IjoxfQ.QUJD");
/// assert_eq!(
///     serde_json::to_value(&input).unwrap(),
///     serde_json::json!({"peer": "127.0.0.1:41234", "handle": "mh1.eyJ2IjoxfQ.QUJD"})
/// );
/// assert!(!format!("{input:?}").contains("mh1."));
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FetchPeerFileInput {
    /// The capsule that minted the handle: `host`, `host:port`, or its `http(s)` URL (a
    /// capsule under a path redeems under it; a query and a fragment are ignored); trimmed,
    /// non-empty. It must be in
    /// `capabilities.peer_fetch.allow` (`peer_not_allowed` otherwise, with no connection).
    pub peer: String,
    /// The token as the peer gave it: `mh1.` and base64url characters and dots, at most
    /// 4 KiB, surrounding whitespace trimmed (`malformed_handle` otherwise).
    pub handle: String,
}

impl FetchPeerFileInput {
    /// A fetch of `handle` from `peer`.
    pub fn new(peer: impl Into<String>, handle: impl Into<String>) -> Self {
        FetchPeerFileInput {
            peer: peer.into(),
            handle: handle.into(),
        }
    }

    /// The input of a JSON call: a non-string `peer` or `handle` reads as empty text, which
    /// the typed call refuses `invalid_input` with the message a missing field has always had.
    ///
    /// # Errors
    /// `invalid_input` when `input` is not a JSON object.
    pub(crate) fn from_json(input: &Value) -> Result<Self, ToolError> {
        json_object(input)?;
        Ok(FetchPeerFileInput {
            peer: json_text(input, "peer"),
            handle: json_text(input, "handle"),
        })
    }

    /// The JSON Schema of the input (draft 2020-12).
    pub fn json_schema() -> Value {
        json!({
            "$schema": SCHEMA_DIALECT,
            "title": "fetch-peer-file input",
            "type": "object",
            "properties": {
                "peer": {
                    "type": "string",
                    "pattern": "\\S",
                    "description": "The capsule that gave you the handle: `host`, \
                        `host:port`, or its http(s) URL (a capsule under a path answers \
                        there), e.g. `127.0.0.1:41234` or `http://10.0.0.7:8080/capsules/a`. \
                        Surrounding whitespace is trimmed."
                },
                "handle": {
                    "type": "string",
                    "pattern": "^\\s*mh1\\.[A-Za-z0-9_.-]*\\s*$",
                    "description": "The handle exactly as the peer gave it: `mh1.` then \
                        base64url characters and dots, at most 4096 characters."
                }
            },
            "required": ["peer", "handle"]
        })
    }
}

impl std::fmt::Debug for FetchPeerFileInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchPeerFileInput")
            .field("peer", &self.peer)
            .field(
                "handle",
                &format_args!("<handle:{}>", crate::hex::handle_id(self.handle.trim())),
            )
            .finish()
    }
}

/// The result of `fetch-peer-file` (D-10.4): `{"path","bytes","sha256","generation","peer"}`;
/// the bytes themselves are in the file at `path`, never here.
///
/// ```
/// use resource_plane::tools::FetchPeerFileOutput;
///
/// let output: FetchPeerFileOutput = serde_json::from_value(serde_json::json!({
///     "path": "peer-in/1eceb5b4b9d1215b-report.md", "bytes": 6,
///     "sha256": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
///     "generation": null, "peer": "127.0.0.1:41234"
/// })).unwrap();
/// assert_eq!(output.generation, None);
/// assert!(output.path.starts_with("peer-in/"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FetchPeerFileOutput {
    /// Where the file landed, relative to the workdir: `peer-in/<handle_id>-<basename>` (see
    /// [`FetchPeerFile`]).
    pub path: String,
    /// The file's size.
    pub bytes: u64,
    /// sha256 of the file, 64 lowercase hex: the peer's etag said the same.
    pub sha256: String,
    /// The minter's `x-murmur-generation` when it sent one (D-5); `None` (`null`) otherwise.
    /// Always present in the JSON form, so reading one back requires it.
    #[serde(deserialize_with = "present_or_null")]
    pub generation: Option<u64>,
    /// The peer as given, trimmed.
    pub peer: String,
}

/// An `Option` field that must be present, `null` or not (serde reads a missing `Option` as
/// `None` unless told otherwise).
fn present_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<u64>::deserialize(d)
}

impl FetchPeerFileOutput {
    /// The JSON Schema of the result (draft 2020-12).
    pub fn json_schema() -> Value {
        json!({
            "$schema": SCHEMA_DIALECT,
            "title": "fetch-peer-file result",
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "pattern": "^peer-in/[0-9a-f]{16}-[A-Za-z0-9._-]{1,120}$",
                    "description": "Where the file landed, relative to your workdir."
                },
                "bytes": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The file's size in bytes."
                },
                "sha256": {
                    "type": "string",
                    "pattern": "^[0-9a-f]{64}$",
                    "description": "The file's sha256, lowercase hex."
                },
                "generation": {
                    "type": ["integer", "null"],
                    "minimum": 0,
                    "description": "The peer's generation counter when it sent the file, \
                        or null."
                },
                "peer": {
                    "type": "string",
                    "description": "The peer, as given."
                }
            },
            "required": ["path", "bytes", "sha256", "generation", "peer"]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basenames() {
        assert_eq!(sanitised_basename(Some("a/b/report.md")), "report.md");
        assert_eq!(sanitised_basename(Some("r é p.md")), "r___p.md");
        assert_eq!(sanitised_basename(Some("..")), "file");
        assert_eq!(sanitised_basename(Some(".")), "file");
        assert_eq!(sanitised_basename(Some("a/")), "file");
        assert_eq!(sanitised_basename(None), "file");
        assert_eq!(sanitised_basename(Some(&"x".repeat(300))).len(), 120);
        assert_eq!(sanitised_basename(Some("../../etc/passwd")), "passwd");
    }

    #[test]
    fn peer_codes() {
        use super::super::PeerCode;
        let refused = |status, body: &[u8]| {
            peer_refusal(status, crate::wire::error_code::read(body).as_deref()).code
        };
        assert_eq!(
            refused(403, br#"{"error":"handle_not_valid"}"#),
            ToolErrorCode::Peer(PeerCode::Spec(Code::HandleNotValid))
        );
        assert_eq!(refused(502, b"<html>"), ToolErrorCode::Http(502));
        assert_eq!(refused(400, br#"{"error":"Evil Code!"}"#), "http_400");
        assert_eq!(refused(500, br#"{"error":"ok"}"#), "http_500");
        assert_eq!(refused(418, br#"{"error":7}"#), "http_418");
        let said = peer_refusal(404, Some("handle_expired"));
        assert_eq!(said.reason, "peer answered HTTP 404 with handle_expired");
        assert_eq!(said.message, "the peer refused the handle: handle_expired");
        let silent = peer_refusal(502, None);
        assert_eq!(
            silent.reason,
            "peer answered HTTP 502 without an error code"
        );
    }
}
