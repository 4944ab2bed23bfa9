//! Audiences and agent cards (D-8): `<name>@<host>:<port>`, lowercased, port always explicit,
//! derived the same way from a peer's card at mint and from the capsule's own card at redeem.
//!
//! A card may also publish the capsule's Ed25519 identity key (D-14.1); a handle minted for a
//! keyed card binds `<audience>#ed25519:<key>` instead of the plain audience (D-14.2).

use crate::card::{AgentSkill, DEFAULT_INPUT_MODES, DEFAULT_OUTPUT_MODES, PROTOCOL_VERSION};
use crate::policy::url_address;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// The `uri` of the card extension that publishes a capsule's identity key for peer-proof v2
/// (D-14.1, D-14.3.1). A card that names only an earlier version's `uri` publishes no key this
/// crate reads: its proofs would not name the origin they are sent to.
pub const PEER_PROOF_URI: &str = "urn:resource-plane:peer-proof:v2";
/// The only `alg` that extension may name.
pub const PEER_PROOF_ALG: &str = "Ed25519";
/// What joins an audience and a key in a keyed handle's MAC audience (D-14.2).
pub const KEY_TAG: &str = "#ed25519:";
/// The length of a 32-byte key in unpadded base64url.
pub const KEY_TEXT_LEN: usize = 43;

/// Whether `name` can head an audience: not empty once trimmed, and no control character
/// (an audience travels as an HTTP header value, which cannot carry one).
pub fn is_usable_name(name: &str) -> bool {
    let name = name.trim();
    !name.is_empty() && !name.chars().any(char::is_control)
}

/// `<name>@<host>:<port>` from a name and an advertised URL, or `None` when either is unusable
/// (a name that is empty or holds a control character: see [`is_usable_name`]).
pub fn audience(name: &str, url: &str) -> Option<String> {
    if !is_usable_name(name) {
        return None;
    }
    let name = name.trim();
    let address = url_address(url)?;
    Some(format!("{name}@{}", address.host_port()).to_ascii_lowercase())
}

/// The audience a card asserts: its `name`, and its top-level `url`, else the first
/// `supportedInterfaces` entry whose `protocolBinding` is `JSONRPC`.
pub fn from_card(card: &Value) -> Option<String> {
    let name = card.get("name")?.as_str()?;
    let url = match card.get("url").and_then(Value::as_str) {
        Some(url) => url,
        None => card
            .get("supportedInterfaces")?
            .as_array()?
            .iter()
            .find(|i| i.get("protocolBinding").and_then(Value::as_str) == Some("JSONRPC"))?
            .get("url")?
            .as_str()?,
    };
    audience(name, url)
}

/// The capsule's own card (D-4.7.1) without an identity key, carrying the default skill of a
/// capsule that declares both planes.
pub fn agent_card(name: &str, url: &str) -> Value {
    agent_card_with_key(name, url, None, &[AgentSkill::file_surfaces(true, true)])
}

/// The capsule's own card (D-4.7.1): valid for A2A 0.3 readers (top-level `url`,
/// `protocolVersion` [`PROTOCOL_VERSION`]) and A2A 1.0 readers (`supportedInterfaces`, one
/// JSON-RPC interface at `url`), with the crate's version and `skills` (which must not be
/// empty: A2A 1.0 requires a skill). With `key` (32 bytes, a capsule that declares
/// `capabilities.peer_fetch`) it also publishes the identity key in the peer-proof extension
/// (D-14.1); without one `capabilities` is empty.
pub fn agent_card_with_key(
    name: &str,
    url: &str,
    key: Option<&[u8; 32]>,
    skills: &[AgentSkill],
) -> Value {
    let description = format!(
        "The read-only file surfaces of the agent capsule {name}: files it exports to its \
         operator and files it shares with named peers by handle. It answers no A2A task."
    );
    let mut card = json!({
        "name": name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "url": url,
        "protocolVersion": PROTOCOL_VERSION,
        "preferredTransport": "JSONRPC",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}
        ],
        "capabilities": {},
        "defaultInputModes": DEFAULT_INPUT_MODES,
        "defaultOutputModes": DEFAULT_OUTPUT_MODES,
        "skills": skills,
    });
    if let (Some(key), Some(fields)) = (key, card.as_object_mut()) {
        fields.insert(
            "capabilities".into(),
            json!({"extensions": [{
                "uri": PEER_PROOF_URI,
                "required": false,
                "params": {"alg": PEER_PROOF_ALG, "key": encode_key(key)},
            }]}),
        );
    }
    card
}

/// A public key as a card and a proof header write it: unpadded base64url.
pub fn encode_key(key: &[u8; 32]) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

/// Whether `text` decodes strictly (no padding, canonical trailing bits) to exactly 32 bytes:
/// a key as a card or a proof header may carry it. Such a text is its one canonical spelling.
pub fn is_key_text(text: &str) -> bool {
    text.len() == KEY_TEXT_LEN
        && URL_SAFE_NO_PAD
            .decode(text)
            .is_ok_and(|bytes| bytes.len() == 32)
}

/// Why a card's peer-proof extension is refused (D-14.2): the mint fails `peer_unreachable`
/// with this as the trace's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedExtension(pub &'static str);

/// The identity key a peer's card publishes (D-14.2): `Ok(Some(key))` with the key exactly as
/// the card writes it when the card carries exactly one extension with [`PEER_PROOF_URI`],
/// `params.alg` [`PEER_PROOF_ALG`] and a `params.key` that decodes strictly to 32 bytes;
/// `Ok(None)` when no extension names that `uri`.
///
/// Only entries whose `uri` is ours are judged: a card without `capabilities.extensions`, or
/// whose extensions are not a list, publishes no key, and other extensions are ignored.
///
/// # Errors
/// [`MalformedExtension`] for an extension with our `uri` that is malformed (no `params`
/// object, another `alg`, a key that is not 32 bytes of strict base64url) or given more than
/// once: never a silent downgrade to the plain audience.
pub fn peer_proof_key(card: &Value) -> Result<Option<String>, MalformedExtension> {
    let Some(extensions) = card
        .get("capabilities")
        .and_then(|c| c.get("extensions"))
        .and_then(Value::as_array)
    else {
        return Ok(None);
    };
    let mut ours = extensions
        .iter()
        .filter(|e| e.get("uri").and_then(Value::as_str) == Some(PEER_PROOF_URI));
    let Some(extension) = ours.next() else {
        return Ok(None);
    };
    if ours.next().is_some() {
        return Err(MalformedExtension(
            "the agent card publishes the peer-proof extension more than once",
        ));
    }
    let Some(params) = extension.get("params").filter(|p| p.is_object()) else {
        return Err(MalformedExtension(
            "the agent card's peer-proof extension has no params object",
        ));
    };
    if params.get("alg").and_then(Value::as_str) != Some(PEER_PROOF_ALG) {
        return Err(MalformedExtension(
            "the agent card's peer-proof extension names an alg other than Ed25519",
        ));
    }
    match params.get("key").and_then(Value::as_str) {
        Some(key) if is_key_text(key) => Ok(Some(key.to_owned())),
        _ => Err(MalformedExtension(
            "the agent card's peer-proof key is not 32 bytes of unpadded base64url",
        )),
    }
}

/// The MAC audience of a handle minted for a keyed peer: `<audience>#ed25519:<key>` (D-14.2).
pub fn keyed(audience: &str, key: &str) -> String {
    format!("{audience}{KEY_TAG}{key}")
}

/// Whether a normalised asserted audience ends like a keyed MAC audience (`#ed25519:` and 43
/// base64url characters). No audience derived from a card does (one ends in `:<port>`), so a
/// redeem without a proof that asserts such a string is refused as a failed MAC: lowercasing
/// could otherwise turn a keyed audience whose key has no capital letter into a plain one that
/// verifies without the key's signature.
pub fn looks_keyed(audience: &[u8]) -> bool {
    let tag = KEY_TAG.as_bytes();
    audience.len() >= tag.len() + KEY_TEXT_LEN && {
        let (head, key) = audience.split_at(audience.len() - KEY_TEXT_LEN);
        head.ends_with(tag)
            && key
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::url_path;

    #[test]
    fn names_with_control_characters_make_no_audience() {
        for name in ["a\nb", "tab\there", "nul\0", "del\u{7f}", "c1\u{85}x", " "] {
            assert_eq!(audience(name, "http://h:1"), None, "{name:?}");
        }
        assert_eq!(
            audience(" Café ", "http://H:1").as_deref(),
            Some("café@h:1"),
            "any other text is a name; only ASCII is lowercased"
        );
    }

    #[test]
    fn both_sides_agree() {
        let card = agent_card(" Reporter ", "http://LocalHost:41234");
        assert_eq!(
            from_card(&card).as_deref(),
            Some("reporter@localhost:41234")
        );
        assert_eq!(
            audience(" Reporter ", "http://LocalHost:41234"),
            from_card(&card)
        );
    }

    #[test]
    fn card_shapes() {
        let only_top = json!({"name":"a","url":"https://h/a2a"});
        assert_eq!(from_card(&only_top).as_deref(), Some("a@h:443"));
        let only_interfaces = json!({"name":"a","supportedInterfaces":[
            {"url":"http://x:1","protocolBinding":"GRPC"},
            {"url":"http://[::1]:9/x","protocolBinding":"JSONRPC"}]});
        assert_eq!(from_card(&only_interfaces).as_deref(), Some("a@[::1]:9"));
        assert_eq!(from_card(&json!({"name":"a"})), None);
        assert_eq!(from_card(&json!({"url":"http://h"})), None);
        assert_eq!(from_card(&json!({"name":"  ","url":"http://h"})), None);
        assert_eq!(from_card(&json!({"name":"a","url":"ftp://h"})), None);
        assert_eq!(from_card(&json!({"name":"a","url":"h:80"})), None);
        assert_eq!(from_card(&json!("x")), None);
    }

    #[test]
    fn a_keyless_card_is_the_plain_card_and_a_keyed_one_publishes_its_key() {
        let skills = [AgentSkill::file_surfaces(true, true)];
        assert_eq!(
            agent_card_with_key("a", "http://h:1", None, &skills),
            agent_card("a", "http://h:1")
        );
        assert_eq!(agent_card("a", "http://h:1")["capabilities"], json!({}));
        let card = agent_card_with_key("a", "http://h:1", Some(&[0xfb; 32]), &skills);
        assert_eq!(
            card["capabilities"],
            json!({"extensions": [{"uri": PEER_PROOF_URI, "required": false,
                "params": {"alg": "Ed25519", "key": "-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_s"}}]})
        );
        assert_eq!(
            peer_proof_key(&card),
            Ok(Some(
                "-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_s".to_owned()
            ))
        );
        assert_eq!(from_card(&card).as_deref(), Some("a@h:1"));
        let text = serde_json::to_string(&card).unwrap();
        assert!(
            text.starts_with(r#"{"name":"a","description":"#),
            "{text}"
        );
        assert_eq!(card["url"], "http://h:1");
        assert_eq!(card["supportedInterfaces"][0]["url"], "http://h:1");
    }

    /// Every field A2A 0.3 and 1.0 readers require, and the two they agree on spelled the
    /// same way: the protocol version at the top and on the one interface.
    #[test]
    fn the_card_carries_what_both_a2a_versions_require() {
        let card = agent_card("a", "http://h:1");
        for field in [
            "name",
            "description",
            "version",
            "url",
            "protocolVersion",
            "supportedInterfaces",
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "skills",
        ] {
            assert!(card.get(field).is_some(), "{field} missing from {card}");
        }
        assert_eq!(card["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(card["protocolVersion"], "0.3.0");
        assert_eq!(
            card["supportedInterfaces"],
            json!([{"url": "http://h:1", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"}])
        );
        assert!(!card["description"].as_str().unwrap().is_empty());
        assert_eq!(card["skills"][0]["id"], "file-surfaces");
        assert!(!card["defaultInputModes"].as_array().unwrap().is_empty());
        assert!(!card["defaultOutputModes"].as_array().unwrap().is_empty());
    }

    #[test]
    fn peer_proof_extensions() {
        let key = encode_key(&[1; 32]);
        let ext =
            |params: Value| json!({"uri": PEER_PROOF_URI, "required": false, "params": params});
        let card = |extensions: Value| json!({"name":"a","url":"http://h:1","capabilities":{"extensions": extensions}});
        let good = ext(json!({"alg": "Ed25519", "key": key}));
        let other = json!({"uri": "urn:other", "params": {"alg": "x"}});
        assert_eq!(
            peer_proof_key(&card(json!([good.clone()]))),
            Ok(Some(key.clone()))
        );
        assert_eq!(
            peer_proof_key(&card(json!([other.clone(), good.clone()]))),
            Ok(Some(key.clone())),
            "other extensions are ignored"
        );
        for keyless in [
            json!({"name":"a","url":"http://h:1"}),
            card(json!([])),
            card(json!([other.clone()])),
            card(json!({"uri": PEER_PROOF_URI})),
            json!({"name":"a","url":"http://h:1","capabilities":"x"}),
            card(json!([{"uri": PEER_PROOF_URI.to_uppercase(), "params": {}}])),
            // A v1 card: its key signs proofs that name no origin, so it is not read.
            card(json!([{"uri": "urn:resource-plane:peer-proof:v1", "required": false,
                         "params": {"alg": "Ed25519", "key": key}}])),
        ] {
            assert_eq!(peer_proof_key(&keyless), Ok(None), "{keyless}");
        }
        let padded = format!("{key}=");
        let short = encode_key(&[1; 32])[..42].to_owned();
        let long = URL_SAFE_NO_PAD.encode([1u8; 33]);
        let std_alphabet = base64::engine::general_purpose::STANDARD_NO_PAD.encode([0xfb; 32]);
        // The last character of a 32-byte key carries two unused bits: 'B' sets one of them.
        let non_canonical = format!("{}B", &key[..42]);
        for malformed in [
            card(json!([good.clone(), good.clone()])),
            card(json!([
                good.clone(),
                ext(json!({"alg": "Ed25519", "key": encode_key(&[2; 32])}))
            ])),
            card(json!([ext(json!({"alg": "ed25519", "key": key}))])),
            card(json!([ext(json!({"alg": "EdDSA", "key": key}))])),
            card(json!([ext(json!({"key": key}))])),
            card(json!([ext(json!({"alg": "Ed25519"}))])),
            card(json!([ext(json!({"alg": "Ed25519", "key": 7}))])),
            card(json!([ext(json!({"alg": "Ed25519", "key": padded}))])),
            card(json!([ext(json!({"alg": "Ed25519", "key": short}))])),
            card(json!([ext(json!({"alg": "Ed25519", "key": long}))])),
            card(json!([ext(json!({"alg": "Ed25519", "key": std_alphabet}))])),
            card(json!([ext(
                json!({"alg": "Ed25519", "key": non_canonical})
            )])),
            card(json!([ext(
                json!({"alg": "Ed25519", "key": format!(" {key}")})
            )])),
            card(json!([ext(json!("params"))])),
            card(json!([{"uri": PEER_PROOF_URI}])),
        ] {
            assert!(peer_proof_key(&malformed).is_err(), "{malformed}");
        }
    }

    #[test]
    fn keyed_audiences_are_told_apart_from_plain_ones() {
        let key = encode_key(&[9; 32]);
        let keyed_audience = keyed("b@h:1", &key);
        assert_eq!(keyed_audience, format!("b@h:1#ed25519:{key}"));
        assert!(looks_keyed(keyed_audience.as_bytes()));
        assert!(looks_keyed(keyed_audience.to_ascii_lowercase().as_bytes()));
        for plain in ["b@h:1", "b#ed25519:x@h:1", "#ed25519:", "", "n#1@h:80"] {
            assert!(!looks_keyed(plain.as_bytes()), "{plain}");
        }
        assert!(!looks_keyed(
            format!("b@h:1#ed25519:{}", &key[1..]).as_bytes()
        ));
        assert!(!looks_keyed(
            format!("b@h:1#ed25519:{}=", &key[1..]).as_bytes()
        ));
    }

    #[test]
    fn url_paths() {
        for (url, path) in [
            ("http://h:1", "/"),
            ("http://h:1/", "/"),
            ("HTTPS://h/a2a/v1?x=1", "/a2a/v1"),
            ("http://[::1]:9/capsules/a#frag", "/capsules/a"),
            ("http://h?q", "/"),
            ("http://h?q=/x", "/"),
        ] {
            assert_eq!(url_path(url), path, "{url}");
        }
    }

    #[test]
    fn default_ports() {
        assert_eq!(audience("n", "http://h").as_deref(), Some("n@h:80"));
        assert_eq!(audience("n", "https://h?q").as_deref(), Some("n@h:443"));
    }
}
