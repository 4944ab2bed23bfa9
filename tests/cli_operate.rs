#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! The operator's side of the binary (D-15, contract.md): `check`, `serve --strict`, the
//! did-you-mean warnings, the ready line's `planes` and `tools`, the log lines and their level,
//! clap's own errors and a `--help` that stands on its own; and, through the library, the
//! strict parse, the tools a manifest grants and the session's counts.
//!
//! Each binary test runs the real `resource-plane` in a [`Workdir`] (`tests/support/process.rs`):
//! one temporary directory holding `wd/` (the workdir, with `out/report.md`), `manifest.yaml`,
//! `tr/` (traces) and `tmp/` (the child's `TMPDIR`), so "creates nothing" is a comparison of
//! the whole directory before and after.

mod support;

use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
use resource_plane::manifest::ParseOptions;
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use serde_json::Value;
use std::sync::Arc;
use support::process::{Exited, Served, Workdir};

/// Every grant: both planes, both capabilities.
const FULL_MANIFEST: &str = "\
name: Reporter
exports:
  files:      { root: out/, mode: read-only, max_bytes: 10Mi }
  peer_files: { root: out/, max_ttl: 15m }
capabilities:
  peer_fetch: { allow: [\"localhost:41234\"] }
  network:    { allow: [\"127.0.0.1\"] }
lifecycle: { after_task: exit }
";

const FILES_MANIFEST: &str = "\
name: reporter
exports:
  files: { root: out/, mode: read-only }
";

// =============================================================================================
// 1. `check`.
// =============================================================================================

#[test]
fn check_prints_the_effective_configuration_as_one_line_and_creates_nothing() {
    let world = with_report(FULL_MANIFEST);
    for extra in [&[][..], &["--workdir", &text(&world, "wd")], &["--strict"]] {
        let before = world.snapshot();
        let out = run(&world, &world.check_args(extra), None);
        assert_eq!(out.code, Some(0), "{extra:?}: {}", out.stderr);
        assert_eq!(out.stderr, "", "{extra:?}: check logs nothing on success");
        assert_eq!(out.stdout.lines().count(), 1, "one line: {:?}", out.stdout);
        let report: Value = serde_json::from_str(&out.stdout).expect("JSON");
        let keys: Vec<&str> = support::trace::keys(&report);
        assert_eq!(
            keys,
            ["check", "manifest", "tools", "confinement", "warnings"]
        );
        assert_eq!(report["check"], "ok");
        assert_eq!(
            report["manifest"],
            serde_json::json!({
                "name": "Reporter",
                "exports": {
                    "files": {"root": "out/", "mode": "read-only", "max_bytes": 10_485_760},
                    "peer_files": {"root": "out/", "max_ttl": 900, "max_bytes": 10_485_760, "require_peer_proof": false},
                },
                "capabilities": {
                    "peer_fetch": {"allow": ["localhost:41234"]},
                    "network": {"allow": ["127.0.0.1"]},
                },
                "lifecycle": {"after_task": "exit"},
            })
        );
        assert_eq!(
            report["tools"],
            serde_json::json!(["fetch-peer-file", "share-file"])
        );
        assert_eq!(report["warnings"], serde_json::json!([]));
        assert_eq!(
            world.snapshot(),
            before,
            "{extra:?}: check created something"
        );
    }

    // Defaults filled in, absent blocks null, warnings listed (not logged).
    let world = with_report("name: bare\nexports: { peer_files: { root: ' shared ' }, file: 1 }\n");
    let out = run(&world, &world.check_args(&[]), None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stderr, "");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["manifest"]["exports"]["files"], Value::Null);
    assert_eq!(
        report["manifest"]["exports"]["peer_files"],
        serde_json::json!({"root": "shared", "max_ttl": 3600, "max_bytes": 10_485_760, "require_peer_proof": false})
    );
    assert_eq!(
        report["manifest"]["capabilities"],
        serde_json::json!({"peer_fetch": null, "network": null})
    );
    assert_eq!(report["manifest"]["lifecycle"]["after_task"], "exit");
    assert_eq!(report["tools"], serde_json::json!(["share-file"]));
    assert_eq!(
        report["warnings"],
        serde_json::json!(["unknown key `exports.file` (did you mean `files`?)"])
    );

    // A manifest declaring nothing is valid, with its warning.
    let world = with_report("name: idle\n");
    let out = run(&world, &world.check_args(&[]), None);
    assert_eq!(out.code, Some(0));
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["tools"], serde_json::json!([]));
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .contains("no plane and no capability"),
        "{warnings:?}"
    );
}

/// `check` refuses exactly as `serve` would, with the same lines, and creates nothing either
/// way.
#[test]
fn check_refuses_with_the_lines_of_a_refused_launch() {
    let cases: [(&str, &str, &[&str], &str, &str); 6] = [
        (
            "malformed",
            "name: r\nexports: { files: { root: out/, mode: read-only, max_bytes: 10MB } }\n",
            &[],
            "E-MAN-003",
            "exports.files.max_bytes: ",
        ),
        (
            "persistent capsule with a long ttl",
            "name: r\nexports: { peer_files: { root: out/ } }\nlifecycle: { after_task: sleep }\n",
            &[],
            "E-CAP-008",
            "exports.peer_files.max_ttl",
        ),
        (
            "strict, unknown key",
            "name: r\nexports: { files: { root: out/, mode: read-only, max_byte: 1 } }\n",
            &["--strict"],
            "E-MAN-003",
            "exports.files.max_byte: unknown key (did you mean `max_bytes`?)",
        ),
        (
            "escaping root",
            "name: r\nexports: { files: { root: escape, mode: read-only } }\n",
            &["--workdir", "WD"],
            "E-CAP-007",
            "exports.files.root: `escape` resolves outside the workdir",
        ),
        (
            "missing workdir",
            FILES_MANIFEST,
            &["--workdir", "WD/missing"],
            "E-CLI-001",
            "--workdir ",
        ),
        (
            "YAML syntax",
            "name: r\nexports:\n  files: { root: out/, mode: read-only }\n peer_files: { root: out/ }\n",
            &[],
            "E-MAN-003",
            "manifest: YAML syntax error at line 4 column 2: did not find expected key",
        ),
    ];
    for (case, manifest, extra, code, message) in cases {
        let world = with_report(manifest);
        std::os::unix::fs::symlink("../tr", world.at("wd/escape")).unwrap();
        let wd = text(&world, "wd");
        let extra: Vec<String> = extra.iter().map(|a| a.replace("WD", &wd)).collect();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let checked = assert_refused(&world, &world.check_args(&extra), code, message);
        let serve_extra: Vec<&str> = extra
            .iter()
            .copied()
            .filter(|a| *a != "--workdir" && !a.starts_with(&wd))
            .collect();
        let mut serve = world.args(&serve_extra);
        if let Some(at) = extra.iter().position(|a| *a == "--workdir") {
            serve[2] = extra[at + 1].to_owned();
        }
        let served = assert_refused(&world, &serve, code, message);
        let refusal = |stderr: &str| -> Vec<String> {
            stderr
                .lines()
                .filter(|l| l.starts_with("error[") || l.starts_with("  hint: "))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(refusal(&checked), refusal(&served), "{case}");
    }

    // Without --workdir the roots are not checked: the escaping root passes.
    let world = with_report("name: r\nexports: { files: { root: escape, mode: read-only } }\n");
    std::os::unix::fs::symlink("../tr", world.at("wd/escape")).unwrap();
    assert_eq!(run(&world, &world.check_args(&[]), None).code, Some(0));

    // An unreadable manifest is a command-line refusal.
    let world = with_report(FILES_MANIFEST);
    let mut args = world.check_args(&[]);
    args[2] = text(&world, "no-such.yaml");
    assert_refused(&world, &args, "E-CLI-001", "--manifest ");
}

/// D-15.8: parsing is linear in the manifest's size, so 100,000 levels of nesting (flow
/// sequences, flow mappings, block sequences) are refused at once, naming where, not after the
/// parser has worked through every level.
#[test]
fn check_refuses_a_hundred_thousand_levels_of_nesting_at_once() {
    let n = 100_000;
    let cases = [
        (
            "flow sequences",
            format!("name: r\nzzz: {}{}\n", "[".repeat(n), "]".repeat(n)),
            2,
        ),
        (
            "flow mappings",
            format!("name: r\nzzz: {}1{}\n", "{a: ".repeat(n), "}".repeat(n)),
            2,
        ),
        (
            "block sequences",
            format!("name: r\nzzz:\n  {}x\n", "- ".repeat(n)),
            3,
        ),
        // A known key's value: refused the same way, before any field is read.
        (
            "under exports",
            format!("name: r\nexports: {}{}\n", "[".repeat(n), "]".repeat(n)),
            2,
        ),
    ];
    for (case, manifest, line) in cases {
        let world = with_report(&manifest);
        let started = std::time::Instant::now();
        let out = run(&world, &world.check_args(&[]), None);
        let took = started.elapsed();
        assert_eq!(out.code, Some(2), "{case}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "error[E-MAN-003]: manifest: YAML nested too deeply at line {line} column "
            )) && out.stderr.contains("(more than 128 levels)"),
            "{case}: {}",
            out.stderr
        );
        // The scan itself takes milliseconds; the bound leaves room for a loaded machine.
        assert!(took < std::time::Duration::from_secs(5), "{case}: {took:?}");
    }
}

/// A token-shaped unknown key is redacted in `check`'s warnings as in `serve`'s warning line:
/// the same `<handle:…>` text, and the token in neither.
#[test]
fn check_redacts_a_token_shaped_unknown_key_as_serve_does() {
    let token = "mh1.eyJ2IjoxLCJwIjoiYS5tZCJ9.QUJDREVGR0hJSktMTU5PUA";
    let world = with_report(&format!(
        "name: r\n{token}: 1\nexports: {{ files: {{ root: out/, mode: read-only }} }}\n"
    ));
    let out = run(&world, &world.check_args(&[]), None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stdout.contains(token), "{}", out.stdout);
    let report: Value = serde_json::from_str(&out.stdout).expect("the report");
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let checked = warnings[0].as_str().unwrap().to_owned();
    assert!(checked.contains("<handle:"), "{checked}");

    let server = start(&world, world.args(&[]), None);
    let stderr = server.stop();
    assert!(!stderr.contains(token), "{stderr}");
    assert!(
        line_with(&stderr, "unknown key").contains(&checked),
        "serve's warning holds check's text {checked:?}:\n{stderr}"
    );
}

// =============================================================================================
// 2. Strict manifests and did-you-mean.
// =============================================================================================

#[test]
fn strict_serve_refuses_an_unknown_key_with_the_exact_message_and_creates_nothing() {
    let world = with_report(
        "name: r\nexports:\n  files: { root: out/, mode: read-only, max_byte: 10Mi }\n",
    );
    let stderr = assert_refused(&world, &world.args(&["--strict"]), "E-MAN-003", "");
    let error = line_with(&stderr, "error[");
    assert_eq!(
        error,
        "error[E-MAN-003]: exports.files.max_byte: unknown key (did you mean `max_bytes`?)"
    );
    assert!(
        !world.at("tr/trace.jsonl").exists(),
        "no trace file for a refused launch"
    );

    // Without a near key, no suggestion; at the top level too.
    let world =
        with_report("name: r\ncolour: blue\nexports: { files: { root: out/, mode: read-only } }\n");
    let stderr = assert_refused(&world, &world.args(&["--strict"]), "E-MAN-003", "");
    assert_eq!(
        line_with(&stderr, "error["),
        "error[E-MAN-003]: colour: unknown key"
    );

    // The same manifest without --strict serves, with the warning.
    let server = start(&world, world.args(&[]), None);
    let stderr = server.stop();
    assert!(
        line_with(&stderr, "unknown key `colour`").contains("WARN"),
        "{stderr}"
    );
}

#[test]
fn unknown_keys_are_warned_about_naming_the_key_meant_at_every_level() {
    let world = with_report(
        "\
nmae: typo
name: r
exports:
  file: {}
  files: { root: out/, mode: read-only, max_byte: 10Mi }
  peer_files: { root: out/, max_tll: 15m, require_peer_proof: false }
capabilities:
  peer_fetch: { allow: [\"localhost:1\"], alow: [x] }
  network: { allow: [\"127.0.0.1\"], colour: red }
lifecycle: { after_tsak: sleep, after_task: exit }
",
    );
    let expected = [
        "unknown key `nmae` (did you mean `name`?)",
        "unknown key `exports.file` (did you mean `files`?)",
        "unknown key `exports.files.max_byte` (did you mean `max_bytes`?)",
        "unknown key `exports.peer_files.max_tll` (did you mean `max_ttl`?)",
        "unknown key `capabilities.peer_fetch.alow` (did you mean `allow`?)",
        "unknown key `capabilities.network.colour`",
        "unknown key `lifecycle.after_tsak` (did you mean `after_task`?)",
    ];
    // `check` lists them in order …
    let out = run(&world, &world.check_args(&[]), None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["warnings"], serde_json::json!(expected));
    // … and `serve` logs each as a warning and serves.
    let server = start(&world, world.args(&[]), None);
    let port = server.port();
    assert_eq!(get(port, "/resources/files"), 200);
    let stderr = server.stop();
    for warning in expected {
        let line = line_with(&stderr, warning);
        assert!(line.contains("WARN"), "{line}");
        assert!(line.ends_with(warning), "{line}");
    }
    assert!(!stderr.contains("error["), "{stderr}");
}

#[test]
fn a_manifest_that_declares_nothing_is_a_warning_and_still_serves() {
    let world = with_report("name: idle\n");
    let server = start(&world, world.args(&[]), None);
    assert_eq!(server.ready["planes"], serde_json::json!([]));
    assert_eq!(server.ready["tools"], serde_json::json!([]));
    assert_eq!(get(server.port(), "/resources/files"), 404);
    let stderr = server.stop();
    assert!(
        line_with(&stderr, "declares no plane and no capability").contains("WARN"),
        "{stderr}"
    );
}

// =============================================================================================
// 3. The ready line.
// =============================================================================================

#[test]
fn the_ready_line_ends_with_the_declared_planes_and_the_registered_tools_sorted() {
    let cases: [(&str, &[&str], &[&str]); 4] = [
        (FILES_MANIFEST, &["files"], &[]),
        (
            FULL_MANIFEST,
            &["files", "peer_files"],
            &["fetch-peer-file", "share-file"],
        ),
        (
            "name: m\nexports: { peer_files: { root: out/ } }\n",
            &["peer_files"],
            &["share-file"],
        ),
        (
            "name: f\ncapabilities: { peer_fetch: { allow: [\"h:1\"] } }\n",
            &[],
            &["fetch-peer-file"],
        ),
    ];
    for (manifest, planes, tools) in cases {
        let world = with_report(manifest);
        let mut server = start(&world, world.args(&["--console"]), None);
        let keys: Vec<&str> = support::trace::keys(&server.ready);
        assert_eq!(
            keys,
            [
                "event",
                "url",
                "audience",
                "session_id",
                "trace",
                "planes",
                "tools",
                "confinement"
            ],
            "the existing fields first, then the new ones: {}",
            server.ready_line
        );
        assert_eq!(
            server.ready["planes"],
            serde_json::json!(planes),
            "{manifest}"
        );
        assert_eq!(
            server.ready["tools"],
            serde_json::json!(tools),
            "{manifest}"
        );
        // The tools are those the console offers.
        let answer = server.console(r#"{"op":"tools"}"#);
        assert_eq!(answer["result"], server.ready["tools"], "{manifest}");
        drop(server.stdin.take());
    }
}

// =============================================================================================
// 4. Logs.
// =============================================================================================

/// At the default level (info): one line when listening, one at shutdown with the session's
/// counts, no line per request; no token and no file content anywhere.
#[test]
fn info_logs_the_listening_and_shutdown_lines_and_nothing_per_request() {
    // A peer whose card the minter fetches.
    let peer_world = with_report(FILES_MANIFEST);
    let peer = start(&peer_world, peer_world.args(&[]), None);
    let peer_url = peer.ready["url"].as_str().unwrap().to_owned();

    let world = with_report(FULL_MANIFEST);
    let mut server = start(&world, world.args(&["--console"]), None);
    let url = server.ready["url"].as_str().unwrap().to_owned();
    let port = server.port();
    assert_eq!(get(port, "/resources/files"), 200);
    assert_eq!(get(port, "/resources/files/report.md"), 200);
    let shared = server.console(&format!(
        r#"{{"op":"call","tool":"share-file","input":{{"path":"report.md","peer":"{peer_url}"}}}}"#
    ));
    assert_eq!(shared["ok"], true, "{shared}");
    let token = shared["result"]["handle"].as_str().unwrap().to_owned();
    // Redeemed without an audience: answered (400 missing_audience), nothing minted.
    assert_eq!(get(port, &format!("/resources/peer/{token}")), 400);
    let stderr = server.stop();

    let listening = line_with(&stderr, "listening");
    assert!(listening.contains("INFO"), "{listening}");
    for field in [
        format!("url={url}"),
        format!("audience={}", server_audience(&url)),
        "planes=files:out/,peer_files:out/".to_owned(),
        "tools=fetch-peer-file,share-file".to_owned(),
        "containment=advisory".to_owned(),
        format!("trace={}", text(&world, "tr/trace.jsonl")),
    ] {
        assert!(
            listening.contains(&field),
            "{field} missing from {listening}"
        );
    }
    let ended = line_with(&stderr, "session ended");
    assert!(ended.contains("INFO"), "{ended}");
    assert!(ended.contains("requests_answered=3"), "{ended}");
    assert!(ended.contains("handles_minted=1"), "{ended}");
    assert!(ended.contains("seconds_run="), "{ended}");
    assert!(
        !stderr.contains("answered method"),
        "no line per request at info:\n{stderr}"
    );
    assert!(!stderr.contains("DEBUG"), "{stderr}");
    assert!(
        !stderr.contains(&token) && !stderr.contains("mh1."),
        "{stderr}"
    );
    assert!(
        !stderr.contains("the report"),
        "no file content in a log:\n{stderr}"
    );
    drop(peer);
}

fn server_audience(url: &str) -> String {
    format!("reporter@{}", url.trim_start_matches("http://"))
}

/// At `debug`, one line per request, its path with any token redacted.
#[test]
fn debug_logs_each_request_without_its_token_or_content() {
    let world = with_report(FULL_MANIFEST);
    let server = start(&world, world.args(&[]), Some("debug"));
    let port = server.port();
    assert_eq!(get(port, "/resources/files/report.md"), 200);
    let forged = "mh1.eyJwIjoicmVwb3J0Lm1kIn0.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    assert_eq!(get(port, &format!("/resources/peer/{forged}")), 400);
    let stderr = server.stop();
    let read = line_with(&stderr, "path=/resources/files/report.md");
    assert!(
        read.contains("DEBUG") && read.contains("status=200"),
        "{read}"
    );
    let redeem = line_with(&stderr, "path=/resources/peer/<handle:");
    assert!(redeem.contains("status=400"), "{redeem}");
    assert!(
        !stderr.contains(forged) && !stderr.contains("mh1."),
        "{stderr}"
    );
    assert!(!stderr.contains("the report"), "{stderr}");
}

#[test]
fn an_unusable_log_level_is_a_warning_and_info_applies() {
    let world =
        with_report("name: r\ncolour: blue\nexports: { files: { root: out/, mode: read-only } }\n");
    for garbage in ["garbage", "info,verbose", "=debug", "debug=", "loud"] {
        let server = start(&world, world.args(&[]), Some(garbage));
        let stderr = server.stop();
        let warning = line_with(&stderr, "RESOURCE_PLANE_LOG");
        assert!(warning.contains("WARN"), "{warning}");
        assert!(warning.contains(&format!("{garbage:?}")), "{warning}");
        assert!(warning.contains("not a log level"), "{warning}");
        // The default, info, applies.
        assert!(line_with(&stderr, "listening").contains("INFO"), "{stderr}");
        assert!(
            line_with(&stderr, "session ended").contains("INFO"),
            "{stderr}"
        );
    }
    // A usable level is obeyed: warn keeps the warning, drops the info lines; error drops
    // both; directives per target work too.
    for (level, warned, informed) in [
        ("warn", true, false),
        ("ERROR", false, false),
        ("info", true, true),
        ("resource_plane=warn", true, false),
        ("warn,resource_plane=info", true, true),
    ] {
        let server = start(&world, world.args(&[]), Some(level));
        let stderr = server.stop();
        assert!(!stderr.contains("RESOURCE_PLANE_LOG"), "{level}: {stderr}");
        assert_eq!(
            stderr.contains("unknown key `colour`"),
            warned,
            "{level}: {stderr}"
        );
        assert_eq!(stderr.contains("listening"), informed, "{level}: {stderr}");
    }
}

// =============================================================================================
// 5. Text that stands alone.
// =============================================================================================

#[test]
fn command_line_errors_keep_clap_s_own_format_and_exit_2() {
    let world = with_report(FILES_MANIFEST);
    for (args, reason) in [
        (
            vec!["serve", "--workdr", "/tmp"],
            "unexpected argument '--workdr'",
        ),
        (vec!["serve", "--workdir", "/tmp"], "--manifest <MANIFEST>"),
        (
            vec![
                "serve",
                "--workdir",
                "/tmp",
                "--manifest",
                "/x",
                "--containment",
                "bogus",
            ],
            "expected advisory, scoped or sealed",
        ),
        (vec!["check"], "--manifest <MANIFEST>"),
        (vec!["frobnicate"], "unrecognized subcommand 'frobnicate'"),
    ] {
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        let before = world.snapshot();
        let out = run(&world, &args, None);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
        // A refused launch's code and hint (contract) around clap's own rendering.
        assert!(
            out.stderr.starts_with("error[E-CLI-001]: "),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains(reason), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("For more information, try '--help'."),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("  hint: ")),
            "{args:?}: {}",
            out.stderr
        );
        assert_eq!(world.snapshot(), before, "{args:?}");
    }
    // clap's tip for a near flag survives.
    let out = run(
        &world,
        &["serve".to_owned(), "--workdr".to_owned(), "/tmp".to_owned()],
        None,
    );
    assert!(
        out.stderr
            .contains("tip: a similar argument exists: '--workdir'"),
        "{}",
        out.stderr
    );
}

#[test]
fn help_carries_a_manifest_the_exit_statuses_and_readme_pointers() {
    let world = with_report(FILES_MANIFEST);
    for args in [
        vec!["--help"],
        vec!["serve", "--help"],
        vec!["check", "--help"],
        vec!["help", "serve"],
    ] {
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        let out = run(&world, &args, None);
        assert_eq!(out.code, Some(0), "{args:?}");
        for needle in [
            "name: reporter",
            "files:      { root: out/, mode: read-only, max_bytes: 10Mi }",
            "lifecycle: { after_task: exit }",
            "Exit status:",
            "  2  a refused launch",
            "RESOURCE_PLANE_LOG",
            "README § Manifest",
            "README § Operating",
        ] {
            assert!(
                out.stdout.contains(needle),
                "{args:?}: {needle:?} missing:\n{}",
                out.stdout
            );
        }
        assert!(
            !out.stdout.contains("decisions") && !out.stdout.contains("D-1"),
            "{args:?}: {}",
            out.stdout
        );
    }
    let out = run(&world, &["serve".to_owned(), "--help".to_owned()], None);
    assert!(out.stdout.contains("--strict"), "{}", out.stdout);
}

// =============================================================================================
// 6. The library's side.
// =============================================================================================

fn launch(manifest: &Manifest) -> Capsule {
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", "hello", 1_700_000_000_000);
    Capsule::launch(
        manifest,
        CapsuleConfig::new("http://127.0.0.1:41234").unwrap(),
        Backends {
            fs,
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            keys: None,
            trace: Arc::new(RecordingTraceSink::new()),
        },
    )
    .expect("launch")
}

#[test]
fn a_capsule_registers_exactly_the_tools_its_manifest_grants() {
    for yaml in [
        "name: a",
        "name: b\nexports: { files: { root: out, mode: read-only } }",
        "name: c\nexports: { peer_files: { root: out } }",
        "name: d\ncapabilities: { peer_fetch: { allow: [h] } }",
        "name: e\nexports: { peer_files: { root: out } }\ncapabilities: { peer_fetch: { allow: [h] } }",
    ] {
        let manifest = Manifest::from_yaml(yaml).unwrap().manifest;
        assert_eq!(
            launch(&manifest).tools().names(),
            manifest.granted_tools(),
            "{yaml}"
        );
    }
}

#[tokio::test]
async fn a_capsule_counts_the_requests_its_router_answers() {
    let manifest = Manifest::from_yaml_with(
        "name: r\nexports: { files: { root: out, mode: read-only } }",
        ParseOptions::STRICT,
    )
    .unwrap()
    .manifest;
    let capsule = launch(&manifest);
    assert_eq!(capsule.stats().requests_answered, 0);
    for path in [
        "/resources/files",
        "/resources/files/report.md",
        "/resources/files/nope",
        "/x",
    ] {
        let request = http::Request::get(path).body(()).unwrap();
        let _ = capsule.router().handle(request).await;
    }
    // Clones of the router share the count.
    let stats = capsule.stats();
    assert_eq!(stats.requests_answered, 4);
    assert_eq!(stats.handles_minted, 0);
}

// =============================================================================================
// Worlds and checks.
// =============================================================================================

/// A workdir holding `out/report.md`, under `manifest`.
fn with_report(manifest: &str) -> Workdir {
    let world = Workdir::new(manifest);
    world.file("out/report.md", "the report\n");
    world
}

/// `path` under the scratch directory, as command-line text.
fn text(world: &Workdir, rel: &str) -> String {
    world.at(rel).display().to_string()
}

/// Runs the binary to its end with `RESOURCE_PLANE_LOG` at `log` (unset when `None`).
fn run(world: &Workdir, args: &[String], log: Option<&str>) -> Exited {
    world.launch(args).log(log).run()
}

/// A `serve` that printed its ready line, stderr captured; stdin open when `args` hold
/// `--console`.
fn start(world: &Workdir, args: Vec<String>, log: Option<&str>) -> Served {
    let launch = world.launch(&args).log(log);
    if args.iter().any(|a| a == "--console") {
        launch.stdin().start()
    } else {
        launch.start()
    }
}

/// `GET path`, returning the status.
fn get(port: u16, path: &str) -> u16 {
    support::http::get(port, path).status
}

/// The one stderr line holding `needle`.
fn line_with<'a>(stderr: &'a str, needle: &str) -> &'a str {
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(lines.len(), 1, "one line with {needle:?} in:\n{stderr}");
    lines[0]
}

/// Requires exit 2, nothing on stdout, `error[code]: message` then a `  hint:` line on
/// stderr, and nothing created in the world. Returns stderr.
fn assert_refused(world: &Workdir, args: &[String], code: &str, message: &str) -> String {
    let before = world.snapshot();
    let out = run(world, args, None);
    assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    assert_eq!(out.stdout, "", "{args:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("error[{code}]: ")))
        .unwrap_or_else(|| panic!("{args:?}: no error[{code}] line:\n{}", out.stderr));
    assert!(
        lines[at].contains(message),
        "{args:?}: {:?} lacks {message:?}",
        lines[at]
    );
    assert!(
        lines.get(at + 1).is_some_and(|l| l.starts_with("  hint: ")),
        "{args:?}: no hint line after the error:\n{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("decisions.md") && !out.stderr.contains("D-1"),
        "operator text points to the README, not the decisions: {}",
        out.stderr
    );
    assert_eq!(world.snapshot(), before, "{args:?} created something");
    out.stderr
}
