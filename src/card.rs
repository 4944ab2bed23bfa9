//! The capsule's agent card (D-4.7.1): what `GET /.well-known/agent-card.json` serves.
//!
//! The card is a valid A2A card for readers of both A2A 0.3 and A2A 1.0: `name`,
//! `description`, `version` (this crate's), `url` and `protocolVersion` (`0.3.0`) for 0.3
//! readers, `supportedInterfaces` for 1.0 readers, `capabilities`, `defaultInputModes`,
//! `defaultOutputModes` and at least one skill. Its `name` and `url` are what a peer derives the
//! capsule's audience from (D-8).
//!
//! A capsule answers no A2A task: the JSON-RPC URL its card advertises answers every `POST`
//! with a JSON-RPC error (`-32601`, see [`Router`](crate::http::Router)). Its skills describe
//! the file surfaces: by default one [`AgentSkill`] written from the planes the manifest
//! declares; a runtime that describes them its own way supplies its skills through
//! [`CapsuleBuilder::skills`](crate::CapsuleBuilder::skills) or
//! [`CapsuleConfig::skills`](crate::CapsuleConfig::skills).

use serde::Serialize;
use std::fmt;

/// The A2A protocol version the card declares, at its top level and for its one interface.
pub const PROTOCOL_VERSION: &str = "0.3.0";

/// The card's `defaultInputModes`: a client speaks to the capsule in JSON (JSON-RPC at its
/// URL, JSON tool input).
pub const DEFAULT_INPUT_MODES: &[&str] = &["application/json"];

/// The card's `defaultOutputModes`: listings are JSON, files are bytes.
pub const DEFAULT_OUTPUT_MODES: &[&str] = &["application/json", "application/octet-stream"];

/// One skill of the capsule's agent card: what A2A calls a distinct capability, here a
/// description of the file surfaces a peer or an operator can reach.
///
/// Every field A2A 1.0 requires is there by construction: [`new`](Self::new) refuses an empty
/// `id`, `name` or `description` and a skill without a tag, so a card built from skills always
/// passes the A2A SDK's validation.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::card::AgentSkill;
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let skill = AgentSkill::new(
///     "quarterly-reports",
///     "Quarterly reports",
///     "Lists and serves the finance team's quarterly reports, read-only.",
///     ["reports", "finance"],
/// )
/// .unwrap()
/// .with_examples(["GET /resources/files/q3.md"]);
///
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }")
///     .unwrap()
///     .manifest;
/// let capsule = Capsule::builder(&manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .skills([skill])
///     .launch()
///     .unwrap();
/// let request = http::Request::get("/.well-known/agent-card.json").body(()).unwrap();
/// let card = capsule.router().handle(request).await;
/// let card: serde_json::Value = serde_json::from_slice(&card.body().bytes()).unwrap();
/// assert_eq!(card["skills"][0]["id"], "quarterly-reports");
/// assert_eq!(card["skills"][0]["tags"], serde_json::json!(["reports", "finance"]));
///
/// // A skill A2A would refuse cannot be built.
/// let untagged = AgentSkill::new("x", "X", "An X.", Vec::<String>::new());
/// assert_eq!(untagged.unwrap_err().field, "tags");
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AgentSkill {
    /// A unique identifier of the skill within the card.
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// What the skill does, for humans and for other agents.
    pub description: String,
    /// Keywords; at least one.
    pub tags: Vec<String>,
    /// Example requests or prompts; omitted from the card when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Media types the skill accepts, overriding the card's `defaultInputModes`; omitted when
    /// empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub input_modes: Vec<String>,
    /// Media types the skill produces, overriding the card's `defaultOutputModes`; omitted when
    /// empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_modes: Vec<String>,
}

/// Why [`AgentSkill::new`] refused a skill: the field A2A 1.0 requires that was empty.
///
/// ```
/// use resource_plane::card::AgentSkill;
///
/// let error = AgentSkill::new("files", " ", "Serves files.", ["files"]).unwrap_err();
/// assert_eq!(error.field, "name");
/// assert_eq!(error.to_string(), "an agent card skill needs a non-empty name");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct InvalidSkill {
    /// `id`, `name`, `description` or `tags`.
    pub field: &'static str,
}

impl fmt::Display for InvalidSkill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an agent card skill needs a non-empty {}", self.field)
    }
}

impl std::error::Error for InvalidSkill {}

impl AgentSkill {
    /// A skill with its required fields, no examples and the card's default modes.
    ///
    /// # Errors
    /// [`InvalidSkill`] naming the first of `id`, `name`, `description` that is empty or only
    /// whitespace, or `tags` when no tag is given or a tag is empty: A2A 1.0 requires each.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
        tags: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, InvalidSkill> {
        let skill = AgentSkill {
            id: id.into(),
            name: name.into(),
            description: description.into(),
            tags: tags.into_iter().map(Into::into).collect(),
            examples: Vec::new(),
            input_modes: Vec::new(),
            output_modes: Vec::new(),
        };
        for (field, text) in [
            ("id", &skill.id),
            ("name", &skill.name),
            ("description", &skill.description),
        ] {
            if text.trim().is_empty() {
                return Err(InvalidSkill { field });
            }
        }
        if skill.tags.is_empty() || skill.tags.iter().any(|tag| tag.trim().is_empty()) {
            return Err(InvalidSkill { field: "tags" });
        }
        Ok(skill)
    }

    /// The same skill with these example requests.
    #[must_use]
    pub fn with_examples(mut self, examples: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.examples = examples.into_iter().map(Into::into).collect();
        self
    }

    /// The same skill accepting these media types instead of the card's defaults.
    #[must_use]
    pub fn with_input_modes(mut self, modes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.input_modes = modes.into_iter().map(Into::into).collect();
        self
    }

    /// The same skill producing these media types instead of the card's defaults.
    #[must_use]
    pub fn with_output_modes(mut self, modes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.output_modes = modes.into_iter().map(Into::into).collect();
        self
    }

    /// The skill a card carries when the runtime supplies none: the capsule's file surfaces,
    /// described from the planes it declares (`files`: the operator plane, `peer_files`: the
    /// peer plane).
    pub(crate) fn file_surfaces(files: bool, peer_files: bool) -> AgentSkill {
        let description = match (files, peer_files) {
            (true, true) => {
                "Read-only file surfaces: GET /resources/files lists the export and \
                 GET /resources/files/<path> reads one file; GET /resources/peer/<handle> \
                 redeems a handle this capsule's share-file tool minted for the caller."
            }
            (true, false) => {
                "Read-only file surface: GET /resources/files lists the export and \
                 GET /resources/files/<path> reads one file."
            }
            (false, true) => {
                "Read-only peer file surface: GET /resources/peer/<handle> redeems a handle \
                 this capsule's share-file tool minted for the caller."
            }
            (false, false) => {
                "This capsule exports no files; it may fetch files its peers share with it."
            }
        };
        AgentSkill {
            id: "file-surfaces".into(),
            name: "Read-only file surfaces".into(),
            description: description.into(),
            tags: vec!["files".into(), "read-only".into(), "resource-plane".into()],
            examples: Vec::new(),
            input_modes: Vec::new(),
            output_modes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skill_a2a_would_refuse_cannot_be_built() {
        let ok = |id: &str, name: &str, description: &str, tags: &[&str]| {
            AgentSkill::new(id, name, description, tags.iter().copied())
        };
        assert!(ok("a", "A", "An a.", &["t"]).is_ok());
        for (skill, field) in [
            (ok("", "A", "d", &["t"]), "id"),
            (ok(" \t", "A", "d", &["t"]), "id"),
            (ok("a", "", "d", &["t"]), "name"),
            (ok("a", "A", "\n", &["t"]), "description"),
            (ok("a", "A", "d", &[]), "tags"),
            (ok("a", "A", "d", &["t", " "]), "tags"),
        ] {
            assert_eq!(skill, Err(InvalidSkill { field }));
        }
    }

    #[test]
    fn optional_lists_are_omitted_when_empty_and_camel_cased_when_not() {
        let skill = AgentSkill::new("a", "A", "d", ["t"]).unwrap();
        assert_eq!(
            serde_json::to_value(&skill).unwrap(),
            serde_json::json!({"id": "a", "name": "A", "description": "d", "tags": ["t"]})
        );
        let skill = skill
            .with_examples(["e"])
            .with_input_modes(["text/plain"])
            .with_output_modes(["application/json"]);
        let value = serde_json::to_value(&skill).unwrap();
        assert_eq!(value["examples"], serde_json::json!(["e"]));
        assert_eq!(value["inputModes"], serde_json::json!(["text/plain"]));
        assert_eq!(
            value["outputModes"],
            serde_json::json!(["application/json"])
        );
    }

    #[test]
    fn the_default_skill_describes_the_declared_planes() {
        let both = AgentSkill::file_surfaces(true, true).description;
        assert!(both.contains("/resources/files") && both.contains("/resources/peer"));
        let files = AgentSkill::file_surfaces(true, false).description;
        assert!(files.contains("/resources/files") && !files.contains("/resources/peer"));
        let peer = AgentSkill::file_surfaces(false, true).description;
        assert!(!peer.contains("/resources/files") && peer.contains("/resources/peer"));
        let none = AgentSkill::file_surfaces(false, false).description;
        assert!(!none.contains("/resources/"));
    }
}
