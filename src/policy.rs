//! The allow-rule matcher of D-11: one parser and one matcher for `capabilities.network.allow`
//! and `capabilities.peer_fetch.allow`, and the parser for the peer addresses tools receive.
//!
//! Hosts compare ASCII case-insensitively and exactly: no wildcards, no DNS, no IP
//! normalisation. A bare rule (`host`, `host:port`) matches either scheme, on its port or on any
//! port when it has none. A URL rule (`http://host[:port]`) binds its scheme, on its port or the
//! scheme's default. A target's port is the one written, else its scheme's default; a bare
//! target is `http`.

use std::fmt;

/// Why a text is no [`Address`] (or no [`AllowRule`]): it renders as what is accepted, the
/// text an `E-MAN-003` or a tool's `invalid_input` names.
///
/// ```
/// use resource_plane::manifest::Address;
///
/// let refused = Address::parse("http://user@peer.example").unwrap_err();
/// assert!(refused.accepted().starts_with("host, host:port, http://host[:port]"));
/// assert_eq!(refused.to_string(), refused.accepted());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressError {
    accepted: &'static str,
}

impl AddressError {
    /// The forms accepted where the text was refused.
    pub const fn accepted(&self) -> &'static str {
        self.accepted
    }
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.accepted)
    }
}

impl std::error::Error for AddressError {}

/// `http` or `https`.
///
/// ```
/// use resource_plane::manifest::{Address, Scheme};
///
/// assert_eq!(Scheme::Https.default_port(), 443);
/// assert_eq!(Scheme::Http.as_str(), "http");
/// let bare = Address::parse("peer.example").unwrap();
/// assert_eq!((bare.scheme, bare.effective_scheme()), (None, Scheme::Http));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP; default port 80.
    Http,
    /// HTTP over TLS; default port 443.
    Https,
}

impl Scheme {
    /// The scheme's default port.
    pub const fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// `http` or `https`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A parsed `host[:port]` or `http(s)://host[:port]` with no path, query or fragment: an
/// allow-list entry's address, or a peer's. The host is compared exactly (ASCII case aside):
/// no wildcard, no DNS lookup, no IP normalisation.
///
/// ```
/// use resource_plane::manifest::{Address, Scheme};
///
/// let peer = Address::parse("HTTPS://Peer.Example").unwrap();
/// assert_eq!(peer.host, "peer.example");
/// assert_eq!(peer.effective_scheme(), Scheme::Https);
/// assert_eq!(peer.host_port(), "peer.example:443");
/// assert_eq!(Address::parse("peer.example:8080").unwrap().base_url(), "http://peer.example:8080");
/// assert!(Address::parse("http://peer.example/card").is_err(), "no path");
/// // A tool's `peer` may be a URL: its address is the part before the path.
/// let peer = Address::parse_peer("http://peer.example/capsules/a").unwrap();
/// assert_eq!(peer.to_string(), "http://peer.example");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The scheme when written.
    pub scheme: Option<Scheme>,
    /// The host, lowercased; IPv6 literals keep their brackets.
    pub host: String,
    /// The port when written.
    pub port: Option<u16>,
}

impl Address {
    /// Parses an address. A trailing `/` alone is accepted after a URL's authority; any other
    /// path, a query, a fragment, userinfo, an empty host or port 0 is refused.
    ///
    /// # Errors
    /// An [`AddressError`] naming what is accepted.
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        const ACCEPTED: AddressError = AddressError {
            accepted: "host, host:port, http://host[:port] or https://host[:port] (no path, query or fragment)",
        };
        let text = text.trim();
        let (scheme, rest) = if let Some(rest) = strip_prefix_ci(text, "http://") {
            (Some(Scheme::Http), rest)
        } else if let Some(rest) = strip_prefix_ci(text, "https://") {
            (Some(Scheme::Https), rest)
        } else {
            (None, text)
        };
        let authority = match (scheme, rest.strip_suffix('/')) {
            (Some(_), Some(a)) => a,
            _ => rest,
        };
        if authority.is_empty()
            || authority
                .bytes()
                .any(|b| matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\') || b.is_ascii_whitespace())
        {
            return Err(ACCEPTED);
        }
        let (host, port) = if let Some(after) = authority.strip_prefix('[') {
            let (inside, tail) = after.split_once(']').ok_or(ACCEPTED)?;
            if inside.is_empty()
                || !inside
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
            {
                return Err(ACCEPTED);
            }
            let port = match tail {
                "" => None,
                t => Some(parse_port(t.strip_prefix(':').ok_or(ACCEPTED)?).ok_or(ACCEPTED)?),
            };
            (format!("[{}]", inside.to_ascii_lowercase()), port)
        } else {
            let (host, port) = match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(parse_port(p).ok_or(ACCEPTED)?)),
                None => (authority, None),
            };
            if host.is_empty()
                || !host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
            {
                return Err(ACCEPTED);
            }
            (host.to_ascii_lowercase(), port)
        };
        Ok(Address { scheme, host, port })
    }

    /// Parses a tool's `peer` for its address alone: `host[:port]`, or an `http(s)` URL with a
    /// host and no userinfo whose path, if any, is a usable one (segments of URL path
    /// characters, none empty, `.` or `..`). The tools also address the peer under that path.
    ///
    /// # Errors
    /// An [`AddressError`] naming what is accepted.
    pub fn parse_peer(text: &str) -> Result<Self, AddressError> {
        PeerUrl::parse(text).map(|peer| peer.address)
    }

    /// The scheme a connection uses: as written, else `http` (D-11).
    pub fn effective_scheme(&self) -> Scheme {
        self.scheme.unwrap_or(Scheme::Http)
    }

    /// The port a connection uses: as written, else the scheme's default (D-8).
    pub fn effective_port(&self) -> u16 {
        self.port
            .unwrap_or_else(|| self.effective_scheme().default_port())
    }

    /// `host:port` with the port always explicit: the audience's tail (D-8).
    pub fn host_port(&self) -> String {
        format!("{}:{}", self.host, self.effective_port())
    }

    /// The base URL to connect to, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!(
            "{}://{}",
            self.effective_scheme().as_str(),
            self.host_port()
        )
    }
}

/// A tool's `peer`: the address to connect to, and the path the peer's capsule answers under
/// (D-20.2): `http://host:port/capsules/a` is a capsule whose card is at
/// `/capsules/a/.well-known/agent-card.json` and whose handles redeem at
/// `/capsules/a/resources/peer/<token>` on `host:port`. A bare `host[:port]`, or a URL with no
/// path, is a capsule at the root.
///
/// ```
/// use resource_plane::policy::PeerUrl;
///
/// let peer = PeerUrl::parse("http://Host.test:8080/capsules/a/?q#f").unwrap();
/// assert_eq!(peer.address.host_port(), "host.test:8080");
/// assert_eq!(peer.under("/.well-known/agent-card.json"), "/capsules/a/.well-known/agent-card.json");
/// assert_eq!(PeerUrl::parse("host.test:8080").unwrap().under("/x"), "/x");
/// assert!(PeerUrl::parse("http://host.test/a/../b").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerUrl {
    /// Where to connect.
    pub address: Address,
    /// The URL's path without its trailing `/`: empty for a capsule at the root.
    pub base_path: String,
}

impl PeerUrl {
    /// Parses a tool's `peer`: `host[:port]`, or an `http(s)` URL with a host and no userinfo,
    /// whose path (if any) must be segments of URL path characters (RFC 3986 `pchar`, a `%`
    /// only before two hex digits), none of them empty, `.` or `..`, with at most a trailing
    /// `/`. A query and a fragment are ignored.
    ///
    /// # Errors
    /// An [`AddressError`] naming what is accepted: one text for an unusable address, another
    /// for an unusable path.
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        /// One description for every refused address, URL or not: what a `peer` may be.
        const ACCEPTED: AddressError = AddressError {
            accepted: "host, host:port (nothing after the port), or an http(s) URL with a host \
                and no userinfo (the capsule answers under its path; its query and fragment \
                are ignored)",
        };
        /// What a peer URL's path may be.
        const PATH: AddressError = AddressError {
            accepted: "an http(s) URL whose path is segments of URL path characters (a `%` \
                only before two hex digits), none of them empty, `.` or `..`",
        };
        let text = text.trim();
        let is_url = ["http://", "https://"]
            .iter()
            .any(|p| strip_prefix_ci(text, p).is_some());
        if !is_url {
            let address = Address::parse(text).map_err(|_| ACCEPTED)?;
            return Ok(PeerUrl {
                address,
                base_path: String::new(),
            });
        }
        let address = url_address(text).ok_or(ACCEPTED)?;
        let path = url_path(text);
        let base_path = path.strip_suffix('/').unwrap_or(path);
        if !base_path.is_empty() && !is_clean_path(base_path) {
            return Err(PATH);
        }
        Ok(PeerUrl {
            address,
            base_path: base_path.to_owned(),
        })
    }

    /// `path` (which starts with `/`) under the peer's base path.
    pub fn under(&self, path: &str) -> String {
        format!("{}{path}", self.base_path)
    }
}

/// Whether `path` (`/a/b`, no trailing `/`) is segments of RFC 3986 `pchar`s, none empty, `.` or
/// `..`, each `%` followed by two hex digits.
fn is_clean_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    rest.split('/').all(|segment| {
        let bytes = segment.as_bytes();
        let escapes_ok = bytes.iter().enumerate().all(|(at, byte)| {
            *byte != b'%'
                || bytes
                    .get(at + 1..at + 3)
                    .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
        });
        !segment.is_empty()
            && segment != "."
            && segment != ".."
            && escapes_ok
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@%".contains(b))
    })
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = self.scheme {
            write!(f, "{}://", s.as_str())?;
        }
        f.write_str(&self.host)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

fn parse_port(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// One entry of an allow list. A bare rule (`host`, `host:port`) admits either scheme, on its
/// port or, without one, on any port; a URL rule (`https://host[:port]`) admits only its scheme
/// on its port (the scheme's default when none is written). A bare target is `http`.
///
/// ```
/// use resource_plane::manifest::{Address, AllowRule};
///
/// let target = |text| Address::parse(text).unwrap();
/// let any_port = AllowRule::parse("localhost").unwrap();
/// assert!(any_port.matches(&target("localhost:41234")));
/// assert!(any_port.matches(&target("https://LOCALHOST")));
/// assert!(!any_port.matches(&target("localhost.evil:41234")));
///
/// let https_only = AllowRule::parse("https://peer.example").unwrap();
/// assert!(https_only.matches(&target("https://peer.example:443")));
/// assert!(!https_only.matches(&target("peer.example:443")), "a bare target is http");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule(Address);

impl AllowRule {
    /// Parses an entry (D-1.6).
    ///
    /// # Errors
    /// An [`AddressError`] naming what is accepted.
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        Address::parse(text).map(AllowRule)
    }

    /// The address as written.
    pub fn address(&self) -> &Address {
        &self.0
    }

    /// The one TCP port this rule can reach: the port written, or for a URL rule its scheme's
    /// default; `None` for a bare rule without a port, which admits any port.
    ///
    /// ```
    /// use resource_plane::manifest::AllowRule;
    ///
    /// assert_eq!(AllowRule::parse("localhost:41234").unwrap().reaches_port(), Some(41234));
    /// assert_eq!(AllowRule::parse("https://peer.example").unwrap().reaches_port(), Some(443));
    /// assert_eq!(AllowRule::parse("localhost").unwrap().reaches_port(), None);
    /// ```
    pub fn reaches_port(&self) -> Option<u16> {
        match self.0.scheme {
            None => self.0.port,
            Some(scheme) => Some(self.0.port.unwrap_or(scheme.default_port())),
        }
    }

    /// Whether this rule admits `target` (D-11).
    pub fn matches(&self, target: &Address) -> bool {
        let rule = &self.0;
        if rule.host != target.host {
            return false;
        }
        match rule.scheme {
            None => rule.port.is_none_or(|p| p == target.effective_port()),
            Some(scheme) => {
                target.effective_scheme() == scheme
                    && rule.port.unwrap_or(scheme.default_port()) == target.effective_port()
            }
        }
    }
}

impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A non-empty allow list: `capabilities.network.allow` (which peers `share-file` may reach)
/// or `capabilities.peer_fetch.allow` (which peers `fetch-peer-file` may redeem from).
///
/// ```
/// use resource_plane::Manifest;
/// use resource_plane::manifest::{Address, AllowList};
///
/// let manifest = Manifest::from_yaml(
///     "name: r\ncapabilities: { peer_fetch: { allow: [localhost:41234, https://peer.example] } }",
/// ).unwrap().manifest;
/// let allow = manifest.peer_fetch.unwrap();
/// assert_eq!(allow.rules().len(), 2);
/// assert!(allow.admits(&Address::parse("localhost:41234").unwrap()));
/// assert!(!allow.admits(&Address::parse("localhost:41235").unwrap()));
/// assert!(AllowList::new(Vec::new()).is_none(), "a declared list is never empty");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList(Vec<AllowRule>);

impl AllowList {
    /// A list from parsed rules; `None` when empty (D-1.6 requires a present list be non-empty).
    pub fn new(rules: Vec<AllowRule>) -> Option<Self> {
        (!rules.is_empty()).then_some(AllowList(rules))
    }

    /// The rules, in the order declared.
    pub fn rules(&self) -> &[AllowRule] {
        &self.0
    }

    /// Whether any rule admits `target`.
    pub fn admits(&self, target: &Address) -> bool {
        self.0.iter().any(|r| r.matches(target))
    }
}

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

/// The path of an `http(s)` URL as a request names it: what follows the host and port, up to a
/// query or fragment; `/` when the URL has none (`http://h:1`). The whole text for a string
/// that is not an `http(s)` URL.
pub fn url_path(url: &str) -> &str {
    let url = url.trim();
    let rest = ["http://", "https://"]
        .iter()
        .find(|p| {
            url.get(..p.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(p))
        })
        .map_or(url, |p| &url[p.len()..]);
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    rest.find('/').map_or("/", |start| &rest[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(rule: &str, target: &str) -> bool {
        AllowRule::parse(rule)
            .unwrap()
            .matches(&Address::parse(target).unwrap())
    }

    #[test]
    fn rule_by_target_table() {
        let table = [
            ("localhost", "localhost:41234", true),
            ("localhost", "https://localhost", true),
            ("LocalHost", "localhost:1", true),
            ("localhost", "localhost.evil:1", false),
            ("localhost:41234", "localhost:41234", true),
            ("localhost:41234", "http://localhost:41234", true),
            ("localhost:41234", "https://localhost:41234", true),
            ("localhost:41234", "localhost:41235", false),
            ("localhost:80", "localhost", true),
            ("http://h", "h", true),
            ("http://h", "h:80", true),
            ("http://h", "h:8080", false),
            ("http://h", "https://h", false),
            ("https://h", "https://h", true),
            ("https://h", "https://h:443", true),
            ("https://h", "h:443", false),
            ("https://h:8443", "https://h:8443", true),
            ("https://h:8443", "http://h:8443", false),
            ("[::1]:9", "http://[::1]:9", true),
            ("[::1]", "[::1]:5", true),
            ("127.0.0.1", "127.0.0.2:1", false),
            ("127.0.0.1", "localhost:1", false),
        ];
        for (rule, target, want) in table {
            assert_eq!(admits(rule, target), want, "{rule} vs {target}");
        }
    }

    #[test]
    fn parse_refusals() {
        for bad in [
            "",
            "http://",
            "http://h/path",
            "h/x",
            "h?q",
            "h#f",
            "u@h",
            "h:0",
            "h:65536",
            "h:-1",
            "h:",
            "ftp://h",
            "h h",
            "[::1",
            "[]:80",
            "[zz]",
            "h:80:80",
            "https://h/a/",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn tool_peers_may_be_urls_with_paths() {
        let a = Address::parse_peer("https://Peer.example:8443/a2a/v1?x#y").unwrap();
        assert_eq!(
            (a.scheme, a.host_port()),
            (Some(Scheme::Https), "peer.example:8443".into())
        );
        assert_eq!(Address::parse_peer("h:9").unwrap().host_port(), "h:9");
        // Every refusal, URL or not, describes the same language, and says a URL's path is
        // ignored, never promising "no path" beside a URL with one.
        let refusals: Vec<String> = ["h/x", "h:9/x", "http:///x", "http://u:p@h:1", "h:0"]
            .iter()
            .map(|peer| Address::parse_peer(peer).expect_err(peer).to_string())
            .collect();
        assert!(refusals.iter().all(|message| *message == refusals[0]));
        assert!(refusals[0].contains("the capsule answers under its path"));
    }
    #[test]
    fn a_peer_urls_path_is_kept_and_an_unusable_one_is_refused_for_what_it_is() {
        let peer = |text| PeerUrl::parse(text).unwrap();
        assert_eq!(peer("http://h:1").base_path, "");
        assert_eq!(peer("http://h:1/").base_path, "");
        assert_eq!(peer("h:1").base_path, "");
        assert_eq!(peer("http://h:1/capsules/a/").base_path, "/capsules/a");
        assert_eq!(peer("HTTPS://H:1/c%2Fd/e@f?x=/..#/..").base_path, "/c%2Fd/e@f");
        assert_eq!(
            peer("http://h:1/capsules/a").under("/resources/peer/t"),
            "/capsules/a/resources/peer/t"
        );
        let path_refusal = PeerUrl::parse("http://h:1/a/../b").unwrap_err().to_string();
        assert!(path_refusal.contains("none of them empty"), "{path_refusal}");
        for bad in [
            "http://h:1/a//b",
            "http://h:1/./a",
            "http://h:1/a/..",
            "http://h:1/a b",
            "http://h:1/a%zz",
            "http://h:1/a%2",
            "http://h:1/caf\u{e9}",
            "http://h:1/a\\b",
            "http://h:1/a\"b",
        ] {
            let refused = PeerUrl::parse(bad).expect_err(bad).to_string();
            assert_eq!(refused, path_refusal, "{bad}");
        }
    }


    #[test]
    fn parse_accepts_and_normalises() {
        let a = Address::parse(" HTTPS://Example.COM:8443/ ").unwrap();
        assert_eq!(a.scheme, Some(Scheme::Https));
        assert_eq!(a.host_port(), "example.com:8443");
        assert_eq!(Address::parse("h").unwrap().host_port(), "h:80");
        assert_eq!(Address::parse("https://h").unwrap().host_port(), "h:443");
        assert_eq!(
            Address::parse("[::1]:7").unwrap().base_url(),
            "http://[::1]:7"
        );
    }
}
