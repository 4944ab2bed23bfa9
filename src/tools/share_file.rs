//! `share-file` (D-9): input → path resolution (no network) → `network.allow` → the peer's card
//! → mint. An escaping path costs no connection; every attempt past input validation leaves one
//! `peer_handle_mint` line.
//!
//! A card that publishes an identity key (D-14.2) binds the handle to
//! `<audience>#ed25519:<key>`, so only a fresh signature by that key redeems it; a malformed
//! key extension fails the mint `peer_unreachable`, and `require_peer_proof` refuses a keyless
//! card with `peer_not_authenticated`. The result's `audience`, and the trace line's, stay the
//! plain audience; the line's `audience_proof` says which binding was minted.

use super::call::{DEADLINE_MESSAGE, SessionEnd, within};
use super::traced::CallLine;
use super::{
    CallOptions, SCHEMA_DIALECT, Tool, ToolError, ToolFuture, checked_text, json_object, json_text,
};
use crate::events::{PeerHandleMint, WithAudienceProof};
use crate::http::client::{CardError, PeerClient, PeerTimeouts};
use crate::planes::{Minted, PeerPlane};
use crate::policy::{AllowList, PeerUrl};
use crate::refusal::{Code, Refusal};
use crate::trace::Tracer;
use crate::units::parse_ttl_secs;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// `share-file`: mints a handle for one file and one named peer. Registered only when the
/// manifest declares `exports.peer_files` (D-12).
///
/// Refusal codes: `invalid_input`, `invalid_ttl`, the path codes (`not_found`,
/// `outside_root`, `symlink_refused`, `not_a_regular_file`, `io_error`), `peer_unreachable`,
/// `peer_not_authenticated`, `io_error` past a deadline or when the trace cannot be written
/// (D-6.4), and `session_ended` once the capsule's session has ended
/// ([`Capsule::end_session`](crate::Capsule::end_session), D-12.1): such a call does nothing
/// and writes no trace line, and a mint the session's end overtakes fails the same way.
///
/// ```
/// use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::refusal::Code;
/// use resource_plane::tools::{ShareFile, ShareFileInput, Tool, Ttl};
/// use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manifest = Manifest::from_yaml(
///     "name: reporter\nexports: { peer_files: { root: out/, max_ttl: 15m } }",
/// ).unwrap().manifest;
/// let fs = Arc::new(MemoryFilesystem::new());
/// fs.add_file("out/report.md", "all green", 0);
/// let trace = Arc::new(RecordingTraceSink::new());
/// let capsule = Capsule::launch(
///     &manifest,
///     CapsuleConfig::new("http://127.0.0.1:41234").unwrap(),
///     Backends { fs, clock: Arc::new(ManualClock::new(0)), keys: None, trace: trace.clone() },
/// ).unwrap();
/// let share = capsule.tools().typed::<ShareFile>().expect("exports.peer_files grants it");
/// assert_eq!(share.input_schema()["required"], serde_json::json!(["path", "peer"]));
///
/// // A ttl of zero is no duration: refused before anything else happens, and not traced.
/// let zero = ShareFileInput::new("report.md", "127.0.0.1:41235").with_ttl(Ttl::Seconds(0));
/// assert_eq!(share.share(zero).await.unwrap_err().code, Code::InvalidTtl);
/// assert!(trace.lines().is_empty());
///
/// // A path that escapes the export root is refused before any connection, with its line.
/// let escape = ShareFileInput::new("../secrets.txt", "127.0.0.1:41235");
/// assert_eq!(share.share(escape).await.unwrap_err().code, Code::OutsideRoot);
/// assert_eq!(trace.events()[0]["outcome"], "outside_root");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ShareFile {
    plane: Arc<dyn PeerPlane>,
    network: Option<AllowList>,
    client: PeerClient,
    tracer: Tracer,
    max_ttl_secs: u64,
    timeouts: PeerTimeouts,
    require_peer_proof: bool,
    /// Raised when the capsule's session ends.
    ended: SessionEnd,
}

/// What one mint has learnt so far, for its trace line.
struct Attempt {
    path: String,
    /// The path as resolved (the payload's `p`), once it is: a minted handle's line records
    /// it, as every redeem of the handle does (D-6.2); a refused mint's records `path`.
    resolved: Option<String>,
    audience: Option<String>,
    /// `"ed25519"` or `"none"` once the card's key extension has been read.
    audience_proof: Option<&'static str>,
}

impl Attempt {
    /// A mint of `path` that has learnt nothing yet.
    fn new(path: String) -> Self {
        Attempt {
            path,
            resolved: None,
            audience: None,
            audience_proof: None,
        }
    }

    /// The attempt's trace line (D-6.2, D-14.2): `peer_handle_mint` naming the handle minted,
    /// or the refusal, with what the attempt had learnt by then.
    fn line(&self, outcome: Result<&Minted, &Refusal>) -> WithAudienceProof<PeerHandleMint> {
        let event = match outcome {
            Ok(minted) => PeerHandleMint {
                handle_id: Some(minted.handle_id.clone()),
                path: self.resolved.clone(),
                audience: self.audience.clone(),
                expires_at_ms: Some(minted.expires_at_ms),
                outcome: "ok",
                reason: None,
            },
            Err(refusal) => PeerHandleMint {
                handle_id: None,
                path: Some(crate::redact::revealing_tokens(&self.path)),
                audience: self.audience.clone(),
                expires_at_ms: None,
                outcome: refusal.code.as_str(),
                reason: Some(refusal.reason.clone()),
            },
        };
        WithAudienceProof {
            event,
            audience_proof: self.audience_proof,
        }
    }
}

impl ShareFile {
    /// The tool over `plane`, fetching cards with `client` as `network` allows.
    pub(crate) fn new(
        plane: Arc<dyn PeerPlane>,
        network: Option<AllowList>,
        client: PeerClient,
        tracer: Tracer,
        max_ttl_secs: u64,
        timeouts: PeerTimeouts,
    ) -> Self {
        ShareFile {
            plane,
            network,
            client,
            tracer,
            max_ttl_secs,
            timeouts,
            require_peer_proof: false,
            ended: SessionEnd::default(),
        }
    }

    /// The same tool refusing every call with `session_ended` once `ended` is raised.
    pub(crate) fn ending_with(mut self, ended: SessionEnd) -> Self {
        self.ended = ended;
        self
    }

    /// The same tool minting only for peers whose card publishes an identity key when
    /// `required` (`exports.peer_files.require_peer_proof`, D-14.2); others are refused with
    /// `peer_not_authenticated`.
    pub fn requiring_peer_proof(mut self, required: bool) -> Self {
        self.require_peer_proof = required;
        self
    }

    /// Mints a handle for `input` (D-9), without a deadline.
    ///
    /// # Errors
    /// See [`ShareFile`].
    pub async fn share(&self, input: ShareFileInput) -> Result<ShareFileOutput, ToolError> {
        self.share_with(input, CallOptions::default()).await
    }

    /// Mints a handle for `input` (D-9) with `options`.
    ///
    /// # Errors
    /// See [`ShareFile`].
    pub async fn share_with(
        &self,
        input: ShareFileInput,
        options: CallOptions,
    ) -> Result<ShareFileOutput, ToolError> {
        if self.ended.ended() {
            return Err(ToolError::of(Code::SessionEnded));
        }
        let path = checked_text(&input.path, "path")?;
        let peer_text = checked_text(&input.peer, "peer")?;
        let peer = PeerUrl::parse(&peer_text).map_err(|accepted| {
            ToolError::new(Code::InvalidInput, format!("`peer` must be {accepted}"))
        })?;
        let ttl_secs = match &input.ttl {
            None => self.max_ttl_secs,
            Some(ttl) => parse_ttl_secs(&ttl.to_json(), self.max_ttl_secs)
                .ok_or_else(|| ToolError::of(Code::InvalidTtl))?,
        };
        let deadline = options.deadline();
        let unfinished = Attempt::new(path.clone());
        let line = CallLine::owe(self.name(), &self.tracer, move || {
            let refusal = Refusal::new(Code::IoError, options.unfinished_reason());
            unfinished.line(Err(&refusal))
        });
        let mut attempt = Attempt::new(path);
        let (outcome, message) =
            match within(deadline, self.mint(&mut attempt, &peer, ttl_secs)).await {
                Ok(outcome) => (outcome, None),
                Err(expired) => (
                    Err(Refusal::new(Code::IoError, expired.reason())),
                    Some(DEADLINE_MESSAGE),
                ),
            };
        line.write(&attempt.line(outcome.as_ref()))?;
        let minted = outcome.map_err(|refusal| match message {
            Some(message) => ToolError::new(refusal.code, message),
            None => ToolError::of(refusal.code),
        })?;
        Ok(ShareFileOutput {
            handle: minted.token,
            handle_id: minted.handle_id,
            expires_at_ms: minted.expires_at_ms,
            audience: attempt.audience.unwrap_or_default(),
        })
    }

    /// The JSON call: the input read into its typed form, then [`share_with`](Self::share_with).
    async fn run(&self, input: Value, options: CallOptions) -> Result<Value, ToolError> {
        let input = ShareFileInput::from_json(&input)?;
        let output = self.share_with(input, options).await?;
        Ok(serde_json::to_value(output).expect("strings and integers always serialise"))
    }

    async fn mint(
        &self,
        attempt: &mut Attempt,
        peer_url: &PeerUrl,
        ttl_secs: u64,
    ) -> Result<Minted, Refusal> {
        let peer = &peer_url.address;
        let plane = self.plane.clone();
        let path = attempt.path.clone();
        let target = crate::blocking::run(move || plane.resolve_for_mint(&path))
            .await
            .map_err(|e| Refusal::new(Code::IoError, format!("resolver task failed: {e}")))??;
        attempt.resolved = Some(target.as_str().to_owned());
        if !self
            .network
            .as_ref()
            .is_some_and(|allow| allow.admits(peer))
        {
            return Err(Refusal::new(
                Code::PeerUnreachable,
                format!("{peer} is not in capabilities.network.allow"),
            ));
        }
        let card = self
            .client
            .card(peer_url, self.timeouts)
            .await
            .map_err(|e| match e {
                CardError::Unreachable(why) => Refusal::new(Code::PeerUnreachable, why),
                CardError::TooLarge => {
                    Refusal::new(Code::PeerUnreachable, "agent card over 64 KiB")
                }
                CardError::Status(status) => Refusal::new(
                    Code::PeerUnreachable,
                    format!("agent card answered HTTP {status}"),
                ),
            })?;
        let audience = crate::audience::from_card(&card).ok_or_else(|| {
            Refusal::new(
                Code::PeerUnreachable,
                "agent card lacks a usable name and url",
            )
        })?;
        attempt.audience = Some(audience.clone());
        // D-14.2: a keyed card binds the key; a malformed key extension is never read as none.
        let key = crate::audience::peer_proof_key(&card)
            .map_err(|malformed| Refusal::new(Code::PeerUnreachable, malformed.0))?;
        attempt.audience_proof = Some(if key.is_some() { "ed25519" } else { "none" });
        let mac_audience = match key {
            Some(key) => crate::audience::keyed(&audience, &key),
            None if self.require_peer_proof => {
                return Err(Refusal::new(
                    Code::PeerNotAuthenticated,
                    "the agent card publishes no identity key, and \
                     exports.peer_files.require_peer_proof is set",
                ));
            }
            None => audience,
        };
        let minted = self.plane.mint(&target, &mac_audience, ttl_secs);
        match minted {
            // Whatever the plane answered, a mint the session's end overtook is that.
            Err(refusal) if self.ended.ended() => Err(Refusal::new(
                Code::SessionEnded,
                format!("the session ended during the mint ({})", refusal.reason),
            )),
            minted => minted,
        }
    }
}

impl Tool for ShareFile {
    fn name(&self) -> &'static str {
        "share-file"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        ShareFileInput::json_schema()
    }

    fn output_schema(&self) -> Value {
        ShareFileOutput::json_schema()
    }

    fn call_with(&self, input: Value, options: CallOptions) -> ToolFuture<'_> {
        Box::pin(self.run(input, options))
    }
}

/// What the model reads about `share-file`.
const DESCRIPTION: &str = "Share one file from this capsule's peer export with one named peer \
capsule. Returns a handle: an `mh1.` token that only that peer can redeem, with its own \
fetch-peer-file tool, until the handle expires. Give the handle to that peer (for example in \
a message); anyone else who gets it cannot use it. Use this when another agent needs a file \
you have. `path` is relative to the peer export root (`report.md`); `peer` is the other \
capsule's address (`host:port` or its http(s) URL); `ttl` optionally shortens the handle's \
life (seconds, or `30s`, `15m`, `1h`, `1d`; capped by the export's max_ttl, which is also the \
default). It never sends the file or its contents itself, never returns the file's path, \
never shares anything outside the export root, and reaches only peers that \
capabilities.network.allow admits.";

/// The input of `share-file` (D-9.1). Unknown fields are ignored, as the JSON call ignores
/// them.
///
/// ```
/// use resource_plane::tools::{ShareFileInput, Ttl};
///
/// let input: ShareFileInput = serde_json::from_value(serde_json::json!({
///     "path": "report.md", "peer": "127.0.0.1:41235", "ttl": "10m"
/// })).unwrap();
/// assert_eq!(
///     input,
///     ShareFileInput::new("report.md", "127.0.0.1:41235").with_ttl(Ttl::from("10m"))
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ShareFileInput {
    /// The file, relative to `exports.peer_files.root`; trimmed, non-empty. Resolved by the
    /// operator plane's rules (D-2.1 to D-2.6): it never escapes the root.
    pub path: String,
    /// The peer capsule: `host`, `host:port`, or an `http(s)` URL whose path, query and
    /// fragment are ignored; trimmed, non-empty. Its agent card is fetched from it, as
    /// `capabilities.network.allow` admits, to learn its audience (D-8).
    pub peer: String,
    /// How long the handle lives, cut down to `exports.peer_files.max_ttl`; that maximum when
    /// absent (or JSON `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Ttl>,
}

impl ShareFileInput {
    /// A share of `path` with `peer`, for the longest ttl allowed.
    pub fn new(path: impl Into<String>, peer: impl Into<String>) -> Self {
        ShareFileInput {
            path: path.into(),
            peer: peer.into(),
            ttl: None,
        }
    }

    /// The same share, living `ttl` (at most `max_ttl`).
    #[must_use]
    pub fn with_ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The input of a JSON call. Each field of the wrong JSON type reads as a value the typed
    /// call refuses with the code and message that field's type error has always had: a
    /// non-string `path` or `peer` as empty text (`invalid_input`, "`path` must be a non-empty
    /// string"), a `ttl` that is neither an integer nor a string as zero seconds
    /// (`invalid_ttl`). So refusals keep their order: `path`, `peer`, `ttl`.
    ///
    /// # Errors
    /// `invalid_input` when `input` is not a JSON object.
    pub(crate) fn from_json(input: &Value) -> Result<Self, ToolError> {
        json_object(input)?;
        let ttl = match input.get("ttl") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(Ttl::Duration(text.clone())),
            Some(Value::Number(n)) => Some(Ttl::Seconds(n.as_u64().unwrap_or(0))),
            Some(_) => Some(Ttl::Seconds(0)),
        };
        Ok(ShareFileInput {
            path: json_text(input, "path"),
            peer: json_text(input, "peer"),
            ttl,
        })
    }

    /// The JSON Schema of the input (draft 2020-12).
    pub fn json_schema() -> Value {
        json!({
            "$schema": SCHEMA_DIALECT,
            "title": "share-file input",
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "pattern": "\\S",
                    "description": "The file to share, relative to the peer export root \
                        (exports.peer_files.root), e.g. `report.md`. Surrounding whitespace \
                        is trimmed."
                },
                "peer": {
                    "type": "string",
                    "pattern": "\\S",
                    "description": "The peer capsule: `host`, `host:port`, or its http(s) URL \
                        (a capsule under a path answers there), e.g. `127.0.0.1:41235` or \
                        `http://10.0.0.7:8080/capsules/b`. Surrounding whitespace is trimmed."
                },
                "ttl": {
                    "description": "How long the handle lives: a positive integer of \
                        seconds, or digits with one suffix s, m, h or d (`90`, `30s`, `15m`, \
                        `1h`, `1d`). Cut down to exports.peer_files.max_ttl, which is also \
                        the default when ttl is absent or null.",
                    "anyOf": [
                        {"type": "integer", "minimum": 1, "maximum": u64::MAX},
                        {"type": "string", "pattern": TTL_PATTERN},
                        {"type": "null"}
                    ]
                }
            },
            "required": ["path", "peer"]
        })
    }
}

/// A D-1.5 duration as `ttl` takes it: digits (at least one not zero), one optional suffix,
/// surrounding whitespace.
const TTL_PATTERN: &str = "^\\s*0*[1-9][0-9]*[smhd]?\\s*$";

/// A handle's requested lifetime (D-1.5): an integer of seconds, or a duration string. Either
/// must be greater than zero; anything else is refused `invalid_ttl`.
///
/// ```
/// use resource_plane::tools::Ttl;
///
/// assert_eq!(serde_json::to_value(Ttl::from(90)).unwrap(), serde_json::json!(90));
/// assert_eq!(serde_json::to_value(Ttl::from("15m")).unwrap(), serde_json::json!("15m"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Ttl {
    /// Whole seconds (`90`).
    Seconds(u64),
    /// Digits with one lowercase suffix `s`, `m`, `h` or `d`, or none (`"30s"`, `"15m"`,
    /// `"1h"`, `"1d"`, `"90"`); surrounding whitespace trimmed. `"1h30m"`, `"5min"`, `"30S"`
    /// and `"1.5h"` are refused.
    Duration(String),
}

impl Ttl {
    fn to_json(&self) -> Value {
        match self {
            Ttl::Seconds(secs) => Value::from(*secs),
            Ttl::Duration(text) => Value::String(text.clone()),
        }
    }
}

impl From<u64> for Ttl {
    fn from(secs: u64) -> Self {
        Ttl::Seconds(secs)
    }
}

impl From<&str> for Ttl {
    fn from(text: &str) -> Self {
        Ttl::Duration(text.to_owned())
    }
}

impl From<String> for Ttl {
    fn from(text: String) -> Self {
        Ttl::Duration(text)
    }
}

/// The result of `share-file` (D-9.1): `{"handle","handle_id","expires_at_ms","audience"}`,
/// and no path. Its `Debug` names the handle by `handle_id` only.
///
/// ```
/// use resource_plane::tools::ShareFileOutput;
///
/// let output: ShareFileOutput = serde_json::from_value(serde_json::json!({
///     "handle": "mh1.eyJ2IjoxfQ.QUJD", "handle_id": "1eceb5b4b9d1215b",
///     "expires_at_ms": 1796142713571_i64, "audience": "reader@127.0.0.1:41235"
/// })).unwrap();
/// assert_eq!(output.audience, "reader@127.0.0.1:41235");
/// assert!(!format!("{output:?}").contains("mh1."));
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ShareFileOutput {
    /// The token, `mh1.<payload>.<mac>`: for the named peer and nobody else; it never reaches
    /// a trace or a log.
    pub handle: String,
    /// The first 16 hex of sha256(handle): how traces and logs name it.
    pub handle_id: String,
    /// When the handle stops redeeming, Unix milliseconds.
    pub expires_at_ms: i64,
    /// The peer's audience, `<name>@<host>:<port>` as its card says (D-8): who may redeem.
    pub audience: String,
}

impl std::fmt::Debug for ShareFileOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareFileOutput")
            .field("handle", &format_args!("<handle:{}>", self.handle_id))
            .field("handle_id", &self.handle_id)
            .field("expires_at_ms", &self.expires_at_ms)
            .field("audience", &self.audience)
            .finish()
    }
}

impl ShareFileOutput {
    /// The JSON Schema of the result (draft 2020-12).
    pub fn json_schema() -> Value {
        json!({
            "$schema": SCHEMA_DIALECT,
            "title": "share-file result",
            "type": "object",
            "properties": {
                "handle": {
                    "type": "string",
                    "pattern": "^mh1\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$",
                    "description": "The handle: give it to the peer, who redeems it with \
                        fetch-peer-file."
                },
                "handle_id": {
                    "type": "string",
                    "pattern": "^[0-9a-f]{16}$",
                    "description": "The handle's public name, as traces and logs give it."
                },
                "expires_at_ms": {
                    "type": "integer",
                    "description": "When the handle stops working, Unix milliseconds."
                },
                "audience": {
                    "type": "string",
                    "description": "Who may redeem it: the peer's `<name>@<host>:<port>`."
                }
            },
            "required": ["handle", "handle_id", "expires_at_ms", "audience"]
        })
    }
}
