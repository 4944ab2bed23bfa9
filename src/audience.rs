//! Audiences and agent cards (D-8): `<name>@<host>:<port>`, lowercased, port always explicit,
//! derived the same way from a peer's card at mint and from the capsule's own card at redeem.

use crate::policy::Address;
use serde_json::{Value, json};

/// The host part of an `http(s)` URL as an [`Address`]; the URL may carry a path.
pub fn url_address(url: &str) -> Option<Address> {
    let url = url.trim();
    let scheme_len = ["http://", "https://"]
        .iter()
        .find(|p| {
            url.get(..p.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(p))
        })?
        .len();
    let rest = &url[scheme_len..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Address::parse(&format!("{}{}", &url[..scheme_len], &rest[..end])).ok()
}

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

/// The capsule's own card (D-4.7).
pub fn agent_card(name: &str, url: &str) -> Value {
    json!({
        "name": name,
        "url": url,
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn default_ports() {
        assert_eq!(audience("n", "http://h").as_deref(), Some("n@h:80"));
        assert_eq!(audience("n", "https://h?q").as_deref(), Some("n@h:443"));
    }
}
