//! The YAML side of a manifest: text to the JSON-shaped value [`Manifest`](super::Manifest) is
//! read from.
//!
//! YAML is read into this module's own tree ([`Node`]) rather than a library value, because
//! D-1.1 makes an unknown key a warning, never an error, whatever it and its value hold, while
//! a general-purpose value refuses some of what YAML allows (an integer over 64 bits) and JSON
//! cannot hold some of the rest (`.inf`, `.nan`, keys that are not strings). The conversion
//! knows which paths the manifest reads ([`known_keys`](super::keys::known_keys)): what cannot be
//! represented is refused there, naming the field, and kept as text anywhere else.

use super::keys::{child_path, known_keys};
use super::{LaunchError, Res, depth};
use serde::de::{self, Deserialize, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess};
use serde_json::Value;
use std::fmt;

/// One YAML node, as written.
#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    /// An integer that does not fit 64 bits, as its decimal text.
    Big(String),
    Float(f64),
    Text(String),
    Sequence(Vec<Node>),
    /// Entries in document order, duplicates included: the conversion refuses those.
    Mapping(Vec<(Node, Node)>),
    /// A tagged node (`!x value`): the tag and the node.
    Tagged(String, Box<Node>),
}

/// The JSON-shaped value of a YAML manifest: its top level must be readable at all (one
/// document, well-formed YAML, within the parser's nesting limit); everything under unknown
/// keys is then accepted as it is.
///
/// The nesting depth is checked first, by a scan linear in the text ([`depth`]): the parser's
/// own limit applies only after it has read the whole document, in time that grows faster than
/// the text.
///
/// # Errors
/// `E-MAN-003` naming the field (or `manifest`) that YAML or JSON cannot carry: a key given
/// twice in one mapping, a non-finite number or an integer over 64 bits where the manifest
/// reads a value; or `manifest` with the line and column of text that is not YAML, or where it
/// nests deeper than [`depth::MAX_DEPTH`] levels.
pub(super) fn manifest_value(text: &str) -> Res<Value> {
    if let Some((line, column)) = depth::first_too_deep(text, depth::MAX_DEPTH) {
        return Err(LaunchError::malformed(
            "manifest",
            format!(
                "YAML nested too deeply at line {line} column {column} (more than {} levels)",
                depth::MAX_DEPTH
            ),
        ));
    }
    let node: Node = serde_norway::from_str(text)
        .map_err(|e| LaunchError::malformed("manifest", unreadable(&e)))?;
    json_of(node, Some(""))
}

/// What is wrong with YAML the parser could not read, for an operator: where, then the
/// parser's own words without the position repeated (``YAML syntax error at line 4 column 2:
/// did not find expected key, while parsing a block mapping``).
fn unreadable(e: &serde_norway::Error) -> String {
    let text = e.to_string();
    let Some(at) = e.location() else {
        return if text.contains("more than one document") {
            "a single YAML document (this file holds more than one)".to_owned()
        } else {
            format!("YAML that can be read ({text})")
        };
    };
    let (line, column) = (at.line(), at.column());
    let detail = text.replacen(&format!(" at line {line} column {column}"), "", 1);
    if detail.starts_with("recursion limit exceeded") {
        format!("YAML nested too deeply at line {line} column {column}")
    } else {
        format!("YAML syntax error at line {line} column {column}: {detail}")
    }
}

/// The JSON-shaped value of `node`. `at` is the node's field path while it is one the manifest
/// reads, `None` under an unknown key, where nothing is an error (D-1.1):
///
/// * a key that is not plain text (`1`, `true`, `~`, a sequence, a tagged `!x name`) becomes
///   its compact text (`1`, `true`, `null`, `["a","b"]`, `!x name`): never the name of a known
///   key, so only an unknown key's warning;
/// * a known key given twice is refused (YAML requires unique keys; the later must not
///   silently replace the earlier); unknown keys that come out as the same text keep the first;
/// * `.inf`, `-.inf` and `.nan` (which JSON would read as null, that is, as absent: `max_bytes:
///   .inf` would silently take the default) and integers over 64 bits are refused where the
///   manifest reads them, naming the field, and kept as text elsewhere;
/// * a tagged value (`!x read-only`, `exports: !x {…}`) is refused where the manifest reads it,
///   and kept as `{"!x": value}` elsewhere.
///
/// The depth scan ([`depth`]) and then the parser bound the nesting depth, so the recursion is
/// bounded too.
fn json_of(node: Node, at: Option<&str>) -> Res<Value> {
    let unrepresentable = |text: String, accepted: &str| match at {
        Some(field) => Err(LaunchError::malformed(
            if field.is_empty() { "manifest" } else { field },
            accepted,
        )),
        None => Ok(Value::String(text)),
    };
    Ok(match node {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(b),
        Node::Unsigned(u) => Value::from(u),
        Node::Signed(i) => Value::from(i),
        Node::Big(text) => unrepresentable(text, "a whole number that fits in 64 bits")?,
        Node::Float(f) => match serde_json::Number::from_f64(f) {
            Some(finite) => Value::Number(finite),
            None => unrepresentable(
                float_text(f),
                "a finite value (.inf and .nan are neither sizes, durations nor names)",
            )?,
        },
        Node::Text(s) => Value::String(s),
        Node::Sequence(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| json_of(item, at.map(|p| format!("{p}[{i}]")).as_deref()))
                .collect::<Res<_>>()?,
        ),
        Node::Mapping(entries) => {
            let mut object = serde_json::Map::with_capacity(entries.len());
            for (key, value) in entries {
                let key = key_text(key)?;
                let known = at.filter(|p| known_keys(p).contains(&key.as_str()));
                let field = known.map(|p| child_path(p, &key));
                let value = json_of(value, field.as_deref())?;
                if object.contains_key(&key) {
                    // A known key given twice must not let the later silently replace the
                    // earlier; unknown keys that read as the same text (`1:` and `"1":`) are
                    // only warnings, and the first stands.
                    match field {
                        Some(field) => {
                            return Err(LaunchError::malformed(
                                &field,
                                "each key once per mapping",
                            ));
                        }
                        None => continue,
                    }
                }
                object.insert(key, value);
            }
            Value::Object(object)
        }
        // A tag where the manifest reads a value is refused, not read as a mapping the field
        // does not expect (a tagged `exports` would otherwise declare nothing, silently).
        Node::Tagged(tag, value) => match at {
            Some(field) => {
                return Err(LaunchError::malformed(
                    if field.is_empty() { "manifest" } else { field },
                    "a value without a YAML tag",
                ));
            }
            None => Value::Object(serde_json::Map::from_iter([(tag, json_of(*value, None)?)])),
        },
    })
}

/// A mapping key's text: plain text as it is, anything else its compact JSON text (a tagged
/// key keeps its tag), so that only plain text can name a known key.
fn key_text(key: Node) -> Res<String> {
    Ok(match key {
        Node::Text(s) => s,
        Node::Tagged(tag, inner) => format!("{tag} {}", key_text(*inner)?),
        other => json_of(other, None)?.to_string(),
    })
}

/// YAML's spelling of a non-finite number.
fn float_text(f: f64) -> String {
    match f {
        f if f.is_nan() => ".nan".into(),
        f if f > 0.0 => ".inf".into(),
        _ => "-.inf".into(),
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> de::Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Node, E> {
        Ok(Node::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Node, E> {
        Ok(Node::Signed(i))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Node, E> {
        Ok(Node::Unsigned(u))
    }

    fn visit_i128<E: de::Error>(self, i: i128) -> Result<Node, E> {
        Ok(match (u64::try_from(i), i64::try_from(i)) {
            (Ok(u), _) => Node::Unsigned(u),
            (_, Ok(i)) => Node::Signed(i),
            _ => Node::Big(i.to_string()),
        })
    }

    fn visit_u128<E: de::Error>(self, u: u128) -> Result<Node, E> {
        Ok(u64::try_from(u).map_or_else(|_| Node::Big(u.to_string()), Node::Unsigned))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Node, E> {
        Ok(Node::Float(f))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Node, E> {
        Ok(Node::Text(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Node, E> {
        Ok(Node::Text(s))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Node, A::Error> {
        let mut sequence = Vec::new();
        while let Some(item) = items.next_element()? {
            sequence.push(item);
        }
        Ok(Node::Sequence(sequence))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Node, A::Error> {
        let mut mapping = Vec::new();
        while let Some(entry) = entries.next_entry()? {
            mapping.push(entry);
        }
        Ok(Node::Mapping(mapping))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, tagged: A) -> Result<Node, A::Error> {
        // The parser hands a local tag over without its `!`: written back as it was.
        let (tag, value): (String, _) = tagged.variant()?;
        let tag = if tag.starts_with('!') {
            tag
        } else {
            format!("!{tag}")
        };
        Ok(Node::Tagged(tag, Box::new(value.newtype_variant()?)))
    }
}
