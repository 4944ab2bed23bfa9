//! `If-None-Match` (D-13.1, RFC 9110 §13.1.2): the condition a conditional read carries.

/// The entity tags an `If-None-Match` request header lists, parsed from every line of it.
///
/// Comparison is weak, as RFC 9110 requires for `If-None-Match`: `W/"x"` matches the tag
/// `"x"`. A header that does not parse as `*` or a list of entity tags is ignored (the read is
/// answered as if it were absent), and so is `*` beside other members.
///
/// ```
/// use resource_plane::planes::IfNoneMatch;
///
/// let sha = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
/// let header = format!("\"sha256:0000\", W/\"sha256:{sha}\"");
/// let condition = IfNoneMatch::parse(&[header.as_bytes()]);
/// assert!(condition.matches(sha));
/// assert!(!IfNoneMatch::parse(&[b"\"sha256:0000\""]).matches(sha));
/// assert!(IfNoneMatch::parse(&[b"*"]).matches(sha));
/// assert!(IfNoneMatch::parse(&[b"not a tag"]).is_absent());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IfNoneMatch(Condition);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Condition {
    /// No header, or one that is ignored.
    #[default]
    Absent,
    /// `*`: any current representation.
    Any,
    /// The opaque tags listed (between the quotes, without `W/`).
    Tags(Vec<String>),
}

/// The most tags one condition keeps: a client polling one file sends one or two; a longer
/// list is someone else's business, and is ignored rather than compared at length.
const MAX_TAGS: usize = 64;

impl IfNoneMatch {
    /// No condition: every read answers in full.
    pub fn absent() -> Self {
        IfNoneMatch(Condition::Absent)
    }

    /// The condition the `If-None-Match` header lines `values` carry, in order; absent when
    /// there are none, or when any of them does not parse.
    pub fn parse(values: &[&[u8]]) -> Self {
        let mut tags = Vec::new();
        let mut any = false;
        for value in values {
            let Ok(text) = std::str::from_utf8(value) else {
                return Self::absent();
            };
            for member in text.split(',') {
                let member = member.trim_matches([' ', '\t']);
                if member.is_empty() {
                    // RFC 9110 §5.6.1: empty list elements are allowed and ignored.
                    continue;
                }
                if member == "*" {
                    any = true;
                    continue;
                }
                let Some(tag) = opaque_tag(member) else {
                    return Self::absent();
                };
                tags.push(tag.to_owned());
                if tags.len() > MAX_TAGS {
                    return Self::absent();
                }
            }
        }
        IfNoneMatch(match (any, tags.is_empty()) {
            (true, true) => Condition::Any,
            (false, false) => Condition::Tags(tags),
            // `*` beside tags, or nothing at all.
            _ => Condition::Absent,
        })
    }

    /// Whether no condition applies.
    pub fn is_absent(&self) -> bool {
        self.0 == Condition::Absent
    }

    /// Whether the condition asks for the file whatever its tag (`*`).
    pub fn is_any(&self) -> bool {
        self.0 == Condition::Any
    }

    /// The opaque tags listed (between the quotes, without `W/`), in order; none for `*` or
    /// no condition. A watch stream resumes from one (D-17.3).
    pub(crate) fn tags(&self) -> &[String] {
        match &self.0 {
            Condition::Tags(tags) => tags,
            Condition::Absent | Condition::Any => &[],
        }
    }

    /// Whether a file whose content hash is `sha256` (lowercase hex; its etag is
    /// `"sha256:<sha256>"`) matches, so that a read answers 304.
    pub fn matches(&self, sha256: &str) -> bool {
        match &self.0 {
            Condition::Absent => false,
            Condition::Any => true,
            Condition::Tags(tags) => tags
                .iter()
                .any(|tag| tag.strip_prefix("sha256:").is_some_and(|hex| hex == sha256)),
        }
    }
}

/// The opaque tag of one entity tag (`"x"` or `W/"x"`), or `None` when `member` is not one:
/// `etagc = %x21 / %x23-7E / obs-text` between the quotes.
fn opaque_tag(member: &str) -> Option<&str> {
    let quoted = member.strip_prefix("W/").unwrap_or(member);
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    inner
        .bytes()
        .all(|b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
        .then_some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn parse(values: &[&str]) -> IfNoneMatch {
        let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        IfNoneMatch::parse(&values)
    }

    #[test]
    fn weak_and_strong_tags_in_lists_and_lines_match() {
        let etag = format!("\"sha256:{SHA}\"");
        for header in [
            vec![etag.clone()],
            vec![format!("W/{etag}")],
            vec![format!("\"a\", {etag}")],
            vec![format!(" ,\t\"a\" ,W/{etag}, ")],
            vec!["\"a\"".to_owned(), etag.clone()],
            vec!["*".to_owned()],
            vec!["*, ".to_owned()],
        ] {
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            assert!(parse(&header).matches(SHA), "{header:?}");
        }
    }

    #[test]
    fn other_tags_do_not_match() {
        for header in [
            "\"a\"",
            "\"sha256:\"",
            "\"SHA256:e3b0\"",
            &format!("\"sha256:{}\"", SHA.to_uppercase()),
            &format!("\"sha256:{SHA}0\""),
            &format!("\"{SHA}\""),
        ] {
            let condition = parse(&[header]);
            assert!(!condition.is_absent(), "{header}");
            assert!(!condition.matches(SHA), "{header}");
        }
    }

    #[test]
    fn malformed_headers_are_ignored() {
        let etag = format!("\"sha256:{SHA}\"");
        for header in [
            vec!["".to_owned()],
            vec!["sha256:x".to_owned()],
            vec![format!("{etag} x")],
            vec![format!("w/{etag}")],
            vec![format!("W/ {etag}")],
            vec!["\"a b\"".to_owned()],
            vec!["\"a\"b\"".to_owned()],
            vec!["\"a".to_owned()],
            vec![format!("*, {etag}")],
            vec![etag.clone(), "*".to_owned()],
            vec![format!("{etag}, bad")],
            vec![
                (0..65)
                    .map(|n| format!("\"{n}\""))
                    .collect::<Vec<_>>()
                    .join(","),
            ],
        ] {
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            let condition = parse(&header);
            assert!(condition.is_absent(), "{header:?}");
            assert!(!condition.matches(SHA), "{header:?}");
        }
        assert!(IfNoneMatch::parse(&[b"\"\xff\""]).is_absent());
        assert!(IfNoneMatch::parse(&[]).is_absent());
    }
}
