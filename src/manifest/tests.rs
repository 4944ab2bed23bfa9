//! Reading manifests: defaults, warnings, and the refusals of malformed fields.

use super::read::NOTHING_DECLARED;
use super::*;

fn parse(yaml: &str) -> Result<Manifest, LaunchError> {
    Manifest::from_yaml(yaml).map(|p| p.manifest)
}

fn field_of(yaml: &str) -> String {
    let e = parse(yaml).expect_err("must be refused");
    assert_eq!(e.code(), "E-MAN-003");
    e.message().split(':').next().unwrap().to_owned()
}

#[test]
fn contract_example_parses_with_defaults() {
    let m = parse(
        "name: reporter\nexports:\n  files: { root: out/, mode: read-only, max_bytes: 10Mi }\n  \
         peer_files: { root: out/, max_ttl: 15m }\ncapabilities:\n  peer_fetch: { allow: [\"localhost:41234\"] }\n  \
         network: { allow: [\"localhost\"] }\nlifecycle: { after_task: exit }\n",
    )
    .unwrap();
    assert_eq!(m.name, "reporter");
    assert_eq!(m.files.as_ref().unwrap().root.declared(), "out/");
    assert_eq!(m.files.as_ref().unwrap().max_bytes, 10 << 20);
    let peer = m.peer_files.unwrap();
    assert_eq!(peer.max_ttl_secs(), 900);
    assert_eq!(peer.max_bytes, DEFAULT_MAX_BYTES);
    assert!(m.peer_fetch.is_some() && m.network.is_some());
}

#[test]
fn require_peer_proof_is_a_boolean_defaulting_to_false() {
    let peer = |extra: &str| {
        parse(&format!(
            "name: x\nexports:\n  peer_files: {{ root: out/{extra} }}"
        ))
    };
    let required = |extra: &str| peer(extra).unwrap().peer_files.unwrap().require_peer_proof;
    assert!(!required(""));
    assert!(!required(", require_peer_proof: false"));
    assert!(required(", require_peer_proof: true"));
    let parsed = Manifest::from_yaml(
        "name: x\nexports:\n  peer_files: { root: out/, require_peer_proof: true }",
    )
    .unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    for bad in ["\"true\"", "yes_please", "1", "0", "[true]", "{ a: true }"] {
        let e = peer(&format!(", require_peer_proof: {bad}")).expect_err(bad);
        assert_eq!(e.code(), "E-MAN-003", "{bad}");
        assert_eq!(
            e.message(),
            "exports.peer_files.require_peer_proof: true or false",
            "{bad}"
        );
    }
    for bad in ["!x true", ".nan"] {
        let yaml =
            format!("name: x\nexports:\n  peer_files: {{ root: out/, require_peer_proof: {bad} }}");
        assert_eq!(
            field_of(&yaml),
            "exports.peer_files.require_peer_proof",
            "{bad}"
        );
    }
    // A null value is absent, as for every field: the default.
    assert!(!required(", require_peer_proof: ~"));
}

#[test]
fn minimal_manifest_declares_nothing() {
    let m = parse("name: x").unwrap();
    assert!(m.files.is_none() && m.peer_files.is_none());
    assert!(m.peer_fetch.is_none() && m.network.is_none());
    assert_eq!(m.after_task, AfterTask::Exit);
    let m = parse("name: x\nexports:\n  peer_files: { root: . }").unwrap();
    assert_eq!(m.peer_files.unwrap().max_ttl_secs(), 3600);
}

#[test]
fn unknown_keys_warn() {
    let p = Manifest::from_yaml(
        "name: x\ncolour: blue\nexports: { files: { root: o, mode: read-only, extra: 1 } }",
    )
    .unwrap();
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    assert!(p.warnings[1].contains("exports.files.extra"));
}

#[test]
fn unknown_key_warnings_name_the_key_meant_at_every_level() {
    for (yaml, warning) in [
        (
            "name: x\nexports: { files: { root: o, mode: read-only, max_byte: 1 } }",
            "unknown key `exports.files.max_byte` (did you mean `max_bytes`?)",
        ),
        (
            "nam: y\nname: x\nexports: { files: { root: o, mode: read-only } }",
            "unknown key `nam` (did you mean `name`?)",
        ),
        (
            "name: x\nexport: {}\nexports: { files: { root: o, mode: read-only } }",
            "unknown key `export` (did you mean `exports`?)",
        ),
        (
            "name: x\nexports: { file: {}, files: { root: o, mode: read-only } }",
            "unknown key `exports.file` (did you mean `files`?)",
        ),
        (
            "name: x\nexports: { peer_files: { root: o, max_tll: 5m } }",
            "unknown key `exports.peer_files.max_tll` (did you mean `max_ttl`?)",
        ),
        (
            "name: x\ncapabilities: { peer_fetc: {}, network: { allow: [a] } }",
            "unknown key `capabilities.peer_fetc` (did you mean `peer_fetch`?)",
        ),
        (
            "name: x\ncapabilities: { peer_fetch: { allow: [a], alow: [b] } }",
            "unknown key `capabilities.peer_fetch.alow` (did you mean `allow`?)",
        ),
        (
            "name: x\ncapabilities: { network: { allow: [a], allows: [b] } }",
            "unknown key `capabilities.network.allows` (did you mean `allow`?)",
        ),
        (
            "name: x\nexports: { files: { root: o, mode: read-only } }\nlifecycle: { after_tsak: exit }",
            "unknown key `lifecycle.after_tsak` (did you mean `after_task`?)",
        ),
        (
            "name: x\nexports: { files: { root: o, mode: read-only, colour: red } }",
            "unknown key `exports.files.colour`",
        ),
    ] {
        let parsed = Manifest::from_yaml(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        assert_eq!(parsed.warnings, vec![warning.to_owned()], "{yaml}");
    }
    // `require_peer_proof` is a key of `exports.peer_files`: no warning.
    let parsed = Manifest::from_yaml(
        "name: x\nexports: { peer_files: { root: o, require_peer_proof: true } }",
    )
    .expect("a known key");
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
}

#[test]
fn strict_parsing_refuses_the_first_unknown_key_at_every_level() {
    for (yaml, message) in [
        (
            "name: x\nexports: { files: { root: o, mode: read-only, max_byte: 1 } }",
            "exports.files.max_byte: unknown key (did you mean `max_bytes`?)",
        ),
        ("name: x\ncolour: blue", "colour: unknown key"),
        (
            "name: x\nexports: { filez: {} }",
            "exports.filez: unknown key (did you mean `files`?)",
        ),
        (
            "name: x\nexports: { peer_files: { root: o, ttl: 5m } }",
            "exports.peer_files.ttl: unknown key",
        ),
        (
            "name: x\ncapabilities: { netwrok: { allow: [a] } }",
            "capabilities.netwrok: unknown key (did you mean `network`?)",
        ),
        (
            "name: x\ncapabilities: { peer_fetch: { allow: [a], deny: [b] } }",
            "capabilities.peer_fetch.deny: unknown key",
        ),
        (
            "name: x\ncapabilities: { network: { Allow: [a] } }",
            "capabilities.network.Allow: unknown key (did you mean `allow`?)",
        ),
        (
            "name: x\nlifecycle: { after: exit }",
            "lifecycle.after: unknown key",
        ),
        // Unknown keys of any shape are refused too, by the text they read as.
        ("name: x\n~: 1", "null: unknown key"),
    ] {
        let e = Manifest::from_yaml_with(yaml, ParseOptions::STRICT).expect_err(yaml);
        assert_eq!(e.code(), "E-MAN-003", "{yaml}");
        assert_eq!(e.message(), message, "{yaml}");
        assert!(e.hint().contains("README § Manifest"), "{}", e.hint());
        // Read leniently, the key is only a warning (the block may still lack a field).
        if let Err(e) = Manifest::from_yaml(yaml) {
            assert!(!e.message().contains("unknown key"), "{yaml}: {e}");
        }
    }
    // Strictness refuses unknown keys only: a clean manifest, and one declaring nothing
    // (a warning, not an unknown key), are accepted.
    let clean = "name: x\nexports: { files: { root: o, mode: read-only } }";
    assert!(Manifest::from_yaml_with(clean, ParseOptions::STRICT).is_ok());
    let nothing = Manifest::from_yaml_with("name: x", ParseOptions::STRICT).expect("valid");
    assert_eq!(nothing.warnings, vec![NOTHING_DECLARED.to_owned()]);
    // The bytes and value entry points take the same options.
    let bytes = Manifest::from_yaml_bytes_with(b"name: x\nnmae: y", ParseOptions::STRICT);
    assert_eq!(
        bytes.expect_err("strict").message(),
        "nmae: unknown key (did you mean `name`?)"
    );
    let value = serde_json::json!({"name": "x", "lifecycle": {"after_task": "exit", "x": 1}});
    assert_eq!(
        Manifest::from_value_with(&value, ParseOptions::STRICT)
            .expect_err("strict")
            .message(),
        "lifecycle.x: unknown key"
    );
    assert!(Manifest::from_value(&value).is_ok());
    assert_eq!(ParseOptions::default(), ParseOptions::LENIENT);
}

#[test]
fn a_manifest_declaring_no_plane_and_no_capability_is_warned_about() {
    let parsed = Manifest::from_yaml("name: x\nlifecycle: { after_task: exit }").unwrap();
    assert_eq!(parsed.warnings, vec![NOTHING_DECLARED.to_owned()]);
    assert!(NOTHING_DECLARED.contains("no plane and no capability"));
    assert!(parsed.manifest.declares_nothing());
    for yaml in [
        "name: x\nexports: { files: { root: o, mode: read-only } }",
        "name: x\nexports: { peer_files: { root: o } }",
        "name: x\ncapabilities: { peer_fetch: { allow: [a] } }",
        "name: x\ncapabilities: { network: { allow: [a] } }",
    ] {
        let parsed = Manifest::from_yaml(yaml).unwrap();
        assert!(parsed.warnings.is_empty(), "{yaml}: {:?}", parsed.warnings);
        assert!(!parsed.manifest.declares_nothing(), "{yaml}");
    }
}

#[test]
fn yaml_syntax_errors_say_where_and_nothing_about_keys() {
    for (yaml, start) in [
        (
            "name: x\nexports:\n  files: {root: out, mode: read-only}\n peer_files: {root: out}\n",
            "manifest: YAML syntax error at line 4 column 2: did not find expected key",
        ),
        (
            "name: x\n  exports: 1\n",
            "manifest: YAML syntax error at line 2 column 10: ",
        ),
        (
            "name: [unclosed\n",
            "manifest: YAML syntax error at line 2 column 1: ",
        ),
        (
            "name: x\n	foo: 1\n",
            "manifest: YAML syntax error at line 2 column 1: ",
        ),
    ] {
        let e = Manifest::from_yaml(yaml).expect_err(yaml);
        assert_eq!(e.code(), "E-MAN-003");
        assert!(e.message().starts_with(start), "{yaml:?}: {}", e.message());
        assert!(!e.message().contains("each key once"), "{}", e.message());
        // The position is said once, up front.
        let position = &start["manifest: YAML syntax error ".len()..];
        let position = position.split(':').next().unwrap();
        assert_eq!(e.message().matches(position).count(), 1, "{}", e.message());
    }
    let e = Manifest::from_yaml("name: x\n---\nname: y\n").expect_err("two documents");
    assert_eq!(
        e.message(),
        "manifest: a single YAML document (this file holds more than one)"
    );
    let deep = format!("name: x\nzzz: {}{}", "[".repeat(200), "]".repeat(200));
    let e = Manifest::from_yaml(&deep).expect_err("too deep");
    assert!(
        e.message()
            .starts_with("manifest: YAML nested too deeply at line 2 column "),
        "{}",
        e.message()
    );
}

#[test]
fn planes_tools_and_the_effective_configuration() {
    let full = parse(
        "name: Reporter\nexports:\n  files: { root: ' out/ ', mode: read-only }\n  \
         peer_files: { root: shared, max_ttl: 15m, max_bytes: 1Ki }\ncapabilities:\n  \
         peer_fetch: { allow: [\"LOCALHOST:41234\", \"https://peer.example/\"] }\n",
    )
    .unwrap();
    assert_eq!(full.planes(), ["files", "peer_files"]);
    assert_eq!(full.granted_tools(), ["fetch-peer-file", "share-file"]);
    assert_eq!(
        full.effective(),
        serde_json::json!({
            "name": "Reporter",
            "exports": {
                "files": {"root": "out/", "mode": "read-only", "max_bytes": 10_485_760},
                "peer_files": {"root": "shared", "max_ttl": 900, "max_bytes": 1024, "require_peer_proof": false},
            },
            "capabilities": {
                "peer_fetch": {"allow": ["localhost:41234", "https://peer.example"]},
                "network": null,
            },
            "lifecycle": {"after_task": "exit"},
        })
    );
    let sleeper = parse(
        "name: s\nexports: { peer_files: { root: . } }\ncapabilities: { network: { allow: [h] } }\n\
         lifecycle: { after_task: sleep }",
    )
    .unwrap();
    assert_eq!(sleeper.planes(), ["peer_files"]);
    assert_eq!(sleeper.granted_tools(), ["share-file"]);
    let effective = sleeper.effective();
    assert_eq!(effective["exports"]["files"], Value::Null);
    assert_eq!(effective["exports"]["peer_files"]["max_ttl"], 3600);
    assert_eq!(
        effective["capabilities"]["network"]["allow"],
        serde_json::json!(["h"])
    );
    assert_eq!(effective["lifecycle"]["after_task"], "sleep");
    let bare = parse("name: b").unwrap();
    assert!(bare.planes().is_empty() && bare.granted_tools().is_empty());
}

#[test]
fn an_integer_over_64_bits_is_refused_naming_its_field() {
    for (yaml, field) in [
        (
            "name: x\nexports:\n  files: { root: o, mode: read-only, max_bytes: 18446744073709551616 }",
            "exports.files.max_bytes",
        ),
        (
            "name: x\nexports:\n  peer_files: { root: o, max_ttl: -99999999999999999999 }",
            "exports.peer_files.max_ttl",
        ),
    ] {
        let refused = Manifest::from_yaml(yaml).unwrap_err();
        assert_eq!(refused.code(), "E-MAN-003");
        assert_eq!(
            refused.message(),
            format!("{field}: a whole number that fits in 64 bits")
        );
    }
    // Under an unknown key it is only that key's warning (D-1.1), as any value is.
    for extra in [
        "zzz: 18446744073709551616",
        "zzz: { a: [-99999999999999999999] }",
    ] {
        let yaml = format!("name: x\n{extra}\n");
        let parsed = Manifest::from_yaml(&yaml).unwrap_or_else(|e| panic!("{extra}: {e:?}"));
        assert_eq!(
            parsed.warnings,
            vec!["unknown key `zzz`".to_owned(), NOTHING_DECLARED.to_owned()]
        );
    }
}

#[test]
fn a_manifest_that_is_not_utf8_is_e_man_003() {
    let refused = Manifest::from_yaml_bytes(b"name: caf\xe9\n").unwrap_err();
    assert_eq!(refused.code(), "E-MAN-003");
    assert_eq!(refused.message(), "manifest: UTF-8 YAML text");
    let parsed = Manifest::from_yaml_bytes("name: café\n".as_bytes()).unwrap();
    assert_eq!(parsed.manifest.name, "café");
}

/// Asserts that each manifest refused names its field: `(yaml, field)` pairs.
fn assert_each_names(cases: &[(&str, &str)]) {
    for (yaml, field) in cases {
        assert_eq!(field_of(yaml), *field, "{yaml}");
    }
}

#[test]
fn a_malformed_document_or_name_is_named() {
    assert_each_names(&[
        ("", "manifest"),
        ("- a", "manifest"),
        ("name: ''", "name"),
        ("name: 3", "name"),
        ("name: \"a\\nb\"", "name"),
        ("name: \"tab\\there\"", "name"),
        ("name: \"del\\x7f\"", "name"),
        ("exports: {}", "name"),
    ]);
}

#[test]
fn malformed_exports_are_named() {
    assert_each_names(&[
        ("name: x\nexports: 3", "exports"),
        (
            "name: x\nexports: { files: { mode: read-only } }",
            "exports.files.root",
        ),
        (
            "name: x\nexports: { files: { root: /abs, mode: read-only } }",
            "exports.files.root",
        ),
        (
            "name: x\nexports: { files: { root: a/../b, mode: read-only } }",
            "exports.files.root",
        ),
        (
            "name: x\nexports: { files: { root: out } }",
            "exports.files.mode",
        ),
        (
            "name: x\nexports: { files: { root: out, mode: read-write } }",
            "exports.files.mode",
        ),
        (
            "name: x\nexports: { files: { root: out, mode: read-only, max_bytes: 10MB } }",
            "exports.files.max_bytes",
        ),
        (
            "name: x\nexports: { files: { root: out, mode: read-only, max_bytes: 0 } }",
            "exports.files.max_bytes",
        ),
        (
            "name: x\nexports: { peer_files: { root: out, max_bytes: -1 } }",
            "exports.peer_files.max_bytes",
        ),
        (
            "name: x\nexports: { peer_files: { root: out, max_ttl: 1h30m } }",
            "exports.peer_files.max_ttl",
        ),
        (
            "name: x\nexports: { peer_files: { root: out, max_ttl: 30S } }",
            "exports.peer_files.max_ttl",
        ),
        (
            "name: x\nexports: { peer_files: { max_ttl: 30s } }",
            "exports.peer_files.root",
        ),
        // A declared block with nothing under it is declared, with its fields missing.
        ("name: x\nexports: { files: }", "exports.files.root"),
        (
            "name: x\nexports:\n  peer_files:\n",
            "exports.peer_files.root",
        ),
        (
            "name: x\nexports: { files: null, peer_files: { root: out } }",
            "exports.files.root",
        ),
    ]);
}

#[test]
fn malformed_capabilities_and_lifecycle_are_named() {
    assert_each_names(&[
        (
            "name: x\ncapabilities: { peer_fetch: { allow: [] } }",
            "capabilities.peer_fetch.allow",
        ),
        (
            "name: x\ncapabilities: { peer_fetch: {} }",
            "capabilities.peer_fetch.allow",
        ),
        (
            "name: x\ncapabilities: { peer_fetch: }",
            "capabilities.peer_fetch.allow",
        ),
        (
            "name: x\ncapabilities: { network: { allow: [\"h/p\"] } }",
            "capabilities.network.allow[0]",
        ),
        (
            "name: x\ncapabilities: { network: { allow: [3] } }",
            "capabilities.network.allow[0]",
        ),
        (
            "name: x\nlifecycle: { after_task: nap }",
            "lifecycle.after_task",
        ),
    ]);
}

/// The message refusing `exports.files.root` written as `root`, checked to be `E-MAN-003`
/// naming that field.
fn refused_root(root: &str) -> String {
    let yaml = format!("name: x\nexports: {{ files: {{ root: {root}, mode: read-only }} }}");
    let e = Manifest::from_yaml(&yaml).expect_err(&yaml);
    assert_eq!(e.code(), "E-MAN-003", "{root}");
    let message = e.message();
    assert!(message.starts_with("exports.files.root: "), "{message}");
    message
}

/// A root YAML reads as a number or a boolean is present: the message says to quote it
/// instead of calling the field required.
#[test]
fn a_root_that_is_not_a_string_is_asked_to_be_quoted() {
    for root in ["8", "1.50", "true", "0x1F"] {
        let message = refused_root(root);
        assert!(
            message.contains("quote") && !message.contains("required"),
            "{root}: {message}"
        );
    }
    let quoted = "name: x\nexports: { files: { root: '8', mode: read-only } }";
    assert_eq!(
        Manifest::from_yaml(quoted)
            .expect("a quoted root")
            .manifest
            .files
            .map(|f| f.root.relative()),
        Some("8".into())
    );
}

/// `.inf` and `.nan` in a known field are refused under that field's name (JSON would have
/// read them as null, so `max_bytes: .inf` silently took the default); under an unknown
/// key they are only that key's warning (D-1.1), as are keys that are not strings.
#[test]
fn infinities_and_nans_are_refused_not_read_as_absent() {
    for (yaml, field) in [
        (
            "name: x\nexports: { files: { root: a, mode: read-only, max_bytes: .inf } }",
            "exports.files.max_bytes",
        ),
        (
            "name: x\nexports: { files: { root: a, mode: read-only, max_bytes: .nan } }",
            "exports.files.max_bytes",
        ),
        ("name: x\nexports: { files: .nan }", "exports.files"),
        (
            "name: x\nexports: { peer_files: { root: a, max_ttl: -.inf } }",
            "exports.peer_files.max_ttl",
        ),
        // String fields too: `.inf` is no name, root or host, never the text ".inf".
        ("name: .nan", "name"),
        (
            "name: x\nexports: { files: { root: .Inf, mode: read-only } }",
            "exports.files.root",
        ),
        (
            "name: x\ncapabilities: { network: { allow: [a, .inf] } }",
            "capabilities.network.allow[1]",
        ),
        (
            "name: x\nlifecycle: { after_task: .nan }",
            "lifecycle.after_task",
        ),
    ] {
        assert_eq!(field_of(yaml), field, "{yaml}");
    }
}

/// A UTF-8 byte order mark opens a valid manifest; a root with a control character is refused
/// at launch (no header could echo it verbatim); a non-string allow entry is told what an
/// entry is, not what the list is.
#[test]
fn byte_order_marks_control_characters_and_entry_messages() {
    let valid = "name: r\nexports:\n  files: {root: out/, mode: read-only}\n";
    let with_bom = [b"\xEF\xBB\xBF".as_slice(), valid.as_bytes()].concat();
    let parsed = Manifest::from_yaml_bytes(&with_bom).expect("a BOM opens a YAML stream");
    assert_eq!(parsed.manifest.name, "r");
    assert!(parsed.warnings.is_empty());

    for root in [
        r#""out\nx""#,
        r#""out\u0001""#,
        r#""out\tx""#,
        r#""a\u007fb""#,
    ] {
        let message = refused_root(root);
        assert!(message.contains("control characters"), "{message}");
    }

    let e = Manifest::from_yaml("name: x\ncapabilities: { peer_fetch: { allow: [5] } }")
        .expect_err("a number is no entry");
    assert!(
        e.message()
            .starts_with("capabilities.peer_fetch.allow[0]: a string: host, host:port"),
        "{}",
        e.message()
    );
}

#[test]
fn unknown_keys_of_any_shape_are_warnings_never_errors() {
    let base = "name: x\nexports: { files: { root: out, mode: read-only } }\n";
    for (extra, key) in [
        ("~: 1", "null"),
        ("null: 1", "null"),
        ("[a, b]: 1", r#"["a","b"]"#),
        ("{a: 1}: 2", r#"{"a":1}"#),
        ("1: x", "1"),
        ("true: 1", "true"),
        ("zzz: .nan", "zzz"),
        ("zzz: {a: [-.inf]}", "zzz"),
        ("zzz: !foo bar", "zzz"),
        // A tagged key is its tag and text: never the known key it spells.
        ("!x name: mallory", "!x name"),
    ] {
        let yaml = format!("{base}{extra}\n");
        let parsed = Manifest::from_yaml(&yaml).unwrap_or_else(|e| panic!("{extra}: {e:?}"));
        assert_eq!(
            parsed.warnings,
            vec![format!("unknown key `{key}`")],
            "{extra}"
        );
    }
    let tagged = format!("{base}!x name: mallory\n");
    assert_eq!(
        Manifest::from_yaml(&tagged).expect("valid").manifest.name,
        "x",
        "a tagged key never replaces the known one it spells"
    );
    // Unknown keys that read as the same text are only warnings (D-1.1).
    for yaml in [
        "name: x\n1: a\n\"1\": b\n",
        "name: x\ncolour: {~: x, \"null\": y}\n",
        "name: x\nzzz: { a: 1, a: 2 }\n",
    ] {
        assert!(Manifest::from_yaml(yaml).is_ok(), "{yaml}");
    }
    for (yaml, field) in [
        (
            "name: x\nexports: !x { files: { root: out, mode: read-only } }",
            "exports",
        ),
        (
            "name: x\nexports: { files: { root: out, mode: !x read-only } }",
            "exports.files.mode",
        ),
    ] {
        assert_eq!(field_of(yaml), field, "{yaml}");
    }
    let nested = "name: x\nexports:\n  ~: 1\n  files: { root: out, mode: read-only }\n";
    let parsed = Manifest::from_yaml(nested).expect("a null key under exports");
    assert_eq!(
        parsed.warnings,
        vec!["unknown key `exports.null`".to_owned()]
    );
}

#[test]
fn a_key_given_twice_is_refused_wherever_it_is() {
    for yaml in [
        "name: x\nname: y",
        "name: x\nexports: { files: { root: a, root: b, mode: read-only } }",
        "name: x\ncapabilities:\n  network: { allow: [a] }\n  network: { allow: [b] }",
    ] {
        let e = Manifest::from_yaml(yaml).expect_err(yaml);
        assert_eq!(e.code(), "E-MAN-003", "{yaml}");
        assert!(
            e.message().ends_with(": each key once per mapping"),
            "{yaml}: {}",
            e.message()
        );
    }
    // Named by the field given twice; under an unknown key it is only that key's warning
    // (D-1.1), the first value standing.
    for (yaml, field) in [
        ("name: x\nname: y", "name"),
        (
            "name: x\nexports: { files: { root: a, root: b } }",
            "exports.files.root",
        ),
    ] {
        assert_eq!(field_of(yaml), field, "{yaml}");
    }
}
