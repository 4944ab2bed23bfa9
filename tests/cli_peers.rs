#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! Real processes: two and three `resource-plane serve --console` capsules wired together through
//! their consoles (contract.md "The console"), exercising the peer plane end to end.
//!
//! Capsule A is a minter (`exports.peer_files` over `out/`, `network.allow: ["127.0.0.1"]`);
//! B and C are fetchers whose `peer_fetch.allow` names A's listener. Each capsule is a
//! [`Served`] of `tests/support/process.rs` in one [`Workdir`]: its stdout read line by line on
//! a thread, its stderr captured to a file, its trace a file outside every workdir; it is
//! killed when dropped.

mod support;

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::doubles::{CardServer, RecordingPeer, SilentPeer, closed_port};
use support::process::{Launch, Served, Stderr, Workdir, tree};
use support::tokens::Signer;
use support::{is_lower_hex, sha256_hex};

/// The longest a console answer or the ready line may take.
const ANSWER_DEADLINE: Duration = Duration::from_secs(20);
/// Tolerance on `expires_at_ms - now`.
const TTL_SLACK_MS: i64 = 5_000;

const REPORT: &[u8] = b"# Quarterly report\nrevenue: 42\nthe end\n";
const SECRET: &[u8] = b"SENTINEL: a secret outside the export root\n";

// ---------------------------------------------------------------------------------------------
// Scenarios.
// ---------------------------------------------------------------------------------------------

/// Scenario 1: share → fetch lands the file under `peer-in/`, with the minter's generation.
#[test]
fn share_then_fetch_lands_the_file_with_the_minters_generation() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, None);
    assert_eq!(a.audience(), format!("minter@127.0.0.1:{}", a.port()));
    assert_eq!(b.audience(), format!("fetcher-b@127.0.0.1:{}", b.port()));

    // Each capsule sees only the tool its own grant declares.
    let tools = a.request(&json!({"op": "tools"}));
    assert_eq!(tools, json!({"ok": true, "result": ["share-file"]}));
    let tools = b.request(&json!({"op": "tools"}));
    assert_eq!(tools, json!({"ok": true, "result": ["fetch-peer-file"]}));
    assert_eq!(
        b.call_err("share-file", json!({"path": "x", "peer": a.addr()})),
        "unknown_tool"
    );

    assert_eq!(a.task_complete(), 1);
    assert_eq!(a.task_complete(), 2);

    let result = a.call_ok("share-file", json!({"path": "report.md", "peer": b.addr()}));
    let (handle, handle_id) = check_share_result(&result, b.audience());
    assert_expires_in(&result, 3_600_000, "default max_ttl is 1h");

    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    let stored = format!("peer-in/{handle_id}-report.md");
    assert_eq!(
        fetched,
        json!({
            "path": stored,
            "bytes": REPORT.len(),
            "sha256": sha256_hex(REPORT),
            "generation": 2,
            "peer": a.addr(),
        }),
        "fetch-peer-file result"
    );
    assert_eq!(
        std::fs::read(b.workdir().join(&stored)).expect("the landed file"),
        REPORT,
        "landed bytes"
    );
    assert_eq!(
        tree(&b.workdir().join("peer-in")),
        [format!("{handle_id}-report.md")],
        "nothing but the landed file under peer-in/ (no temp file left)"
    );

    // Traces on both sides name the same handle_id.
    let mints = a.events("peer_handle_mint");
    assert_eq!(mints.len(), 1, "one mint line: {mints:?}");
    assert_eq!(mints[0]["outcome"], "ok");
    assert_eq!(mints[0]["handle_id"], handle_id.as_str());
    assert_eq!(mints[0]["path"], "report.md");
    assert_eq!(mints[0]["audience"], b.audience());
    assert_eq!(mints[0]["expires_at_ms"], result["expires_at_ms"]);
    let redeems = a.events("peer_handle_redeem");
    assert_eq!(redeems.len(), 1, "one redeem line: {redeems:?}");
    assert_eq!(redeems[0]["outcome"], "ok");
    assert_eq!(redeems[0]["handle_id"], handle_id.as_str());
    assert_eq!(redeems[0]["path"], "report.md");
    assert_eq!(redeems[0]["generation"], 2);
    assert_eq!(redeems[0]["audience_asserted"], b.audience());
    assert_eq!(redeems[0]["bytes"], REPORT.len());
    assert_eq!(redeems[0]["sha256"], sha256_hex(REPORT));
    let fetches = b.events("peer_file_fetch");
    assert_eq!(fetches.len(), 1, "one fetch line: {fetches:?}");
    assert_eq!(fetches[0]["outcome"], "ok");
    assert_eq!(fetches[0]["handle_id"], handle_id.as_str());
    assert_eq!(fetches[0]["stored_path"], stored.as_str());
    assert_eq!(fetches[0]["peer"], a.addr());
    assert_eq!(fetches[0]["reason"], Value::Null);
    assert_trace_well_formed(&a);
    assert_trace_well_formed(&b);
}

/// Scenario 2: a third capsule, asserting its own identity, cannot redeem B's handle.
#[test]
fn third_capsule_cannot_redeem_a_handle_minted_for_another() {
    let world = Workdir::new("");
    let (mut a, b) = minter_and_fetcher(&world, Some("15m"));
    let mut c = spawn(
        &world,
        "c",
        &world.workdir("c"),
        &fetcher_manifest("fetcher-c", &a.addr()),
        "127.0.0.1:0",
    );
    let (handle, handle_id) = share(&mut a, &b);

    let code = c.call_err(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(code, "handle_not_valid");
    assert!(
        !c.workdir()
            .join("peer-in")
            .join(format!("{handle_id}-report.md"))
            .exists(),
        "nothing landed in C's workdir"
    );

    let fetches = c.events("peer_file_fetch");
    assert_eq!(outcomes(&fetches), ["handle_not_valid"], "C's fetch lines");
    assert_eq!(fetches[0]["handle_id"], handle_id.as_str());
    assert_eq!(fetches[0]["stored_path"], Value::Null);
    let redeems = a.events("peer_handle_redeem");
    assert_eq!(outcomes(&redeems), ["handle_not_valid"], "A's redeem lines");
    assert_eq!(redeems[0]["handle_id"], handle_id.as_str());
    assert_eq!(redeems[0]["audience_asserted"], c.audience());
    assert_eq!(
        redeems[0]["path"],
        Value::Null,
        "a refused MAC names no path"
    );
    assert_eq!(redeems[0]["bytes"], Value::Null);
    assert!(b.events("peer_file_fetch").is_empty(), "B fetched nothing");
    assert_trace_well_formed(&c);
}

/// Scenario 3: a handle redeems until `max_ttl` passes, then answers `handle_expired`.
#[test]
fn handle_expires_after_max_ttl() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, Some("2s"));
    let result = a.call_ok("share-file", json!({"path": "report.md", "peer": b.addr()}));
    let (handle, _) = check_share_result(&result, b.audience());
    assert_expires_in(&result, 2_000, "max_ttl 2s");
    let expires = result["expires_at_ms"].as_i64().expect("expires_at_ms");

    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(fetched["bytes"], REPORT.len());

    let wait = u64::try_from(expires + 500 - now_ms()).unwrap_or(0);
    std::thread::sleep(Duration::from_millis(wait));
    let code = b.call_err(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(code, "handle_expired");
    assert_eq!(
        outcomes(&a.events("peer_handle_redeem")),
        ["ok", "handle_expired"]
    );
    assert_eq!(
        outcomes(&b.events("peer_file_fetch")),
        ["ok", "handle_expired"]
    );
}

/// Scenario 4: `ttl` narrows and is clamped to `max_ttl`; bad ttls and inputs are refused
/// before any mint line.
#[test]
fn share_file_ttl_is_clamped_and_validated() {
    let world = Workdir::new("");
    let (mut a, b) = minter_and_fetcher(&world, Some("15m"));
    let cases: [(Value, i64); 8] = [
        (json!("1d"), 900_000),
        (json!("30s"), 30_000),
        (json!(60), 60_000),
        (json!(" 2m "), 120_000),
        (Value::Null, 900_000),
        // However long a well-formed ttl is written, it is clamped, never refused (D-9.3).
        (json!("9223372036854776"), 900_000),
        (json!("99999999999999999999999d"), 900_000),
        (json!(u64::MAX), 900_000),
    ];
    for (ttl, want_ms) in &cases {
        let mut input = json!({"path": "report.md", "peer": b.addr()});
        if !ttl.is_null() {
            input["ttl"] = ttl.clone();
        }
        let result = a.call_ok("share-file", input);
        check_share_result(&result, b.audience());
        assert_expires_in(&result, *want_ms, &format!("ttl {ttl}"));
    }
    assert_eq!(a.events("peer_handle_mint").len(), cases.len());

    for ttl in [
        json!("1h30m"),
        json!("0"),
        json!(0),
        json!("-5"),
        json!(-5),
        json!("5min"),
        json!("30S"),
        json!(1.5),
        json!("1.5h"),
        json!(""),
        json!(true),
    ] {
        let code = a.call_err(
            "share-file",
            json!({"path": "report.md", "peer": b.addr(), "ttl": ttl}),
        );
        assert_eq!(code, "invalid_ttl", "ttl {ttl}");
    }

    for input in [
        json!({"peer": b.addr()}),
        json!({"path": "report.md"}),
        json!({"path": "", "peer": b.addr()}),
        json!({"path": "report.md", "peer": ""}),
        json!({"path": "   ", "peer": b.addr()}),
        json!({"path": "report.md", "peer": "  "}),
        json!({"path": 7, "peer": b.addr()}),
        json!({}),
        json!("report.md"),
    ] {
        let code = a.call_err("share-file", input.clone());
        assert_eq!(code, "invalid_input", "input {input}");
    }
    assert_eq!(
        a.events("peer_handle_mint").len(),
        cases.len(),
        "input and ttl refusals leave no mint line (D-9.3)"
    );
}

/// Scenario 5: `peer_fetch.allow` and the token shape are checked before any connection.
#[test]
fn fetch_refuses_disallowed_peers_and_malformed_handles_before_connecting() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, Some("15m"));
    let (handle, handle_id) = share(&mut a, &b);
    let silent = SilentPeer::new();
    let redeems_before = a.events("peer_handle_redeem").len();
    assert_eq!(redeems_before, 0);

    let not_allowed = [
        format!("127.0.0.2:{}", a.port()),
        format!("127.0.0.1:{}", a.port() + 1),
        format!("localhost:{}", a.port()),
        format!("https://127.0.0.1:{}", a.port() + 1),
        silent.addr(),
    ];
    for peer in &not_allowed {
        let code = b.call_err("fetch-peer-file", json!({"peer": peer, "handle": handle}));
        assert_eq!(code, "peer_not_allowed", "peer {peer}");
    }
    silent.assert_untouched("a peer outside peer_fetch.allow");

    for bad in ["hello", "mh1.$$$", "mh1.a b.c", "MH1.abc.def"] {
        let code = b.call_err("fetch-peer-file", json!({"peer": a.addr(), "handle": bad}));
        assert_eq!(code, "malformed_handle", "handle {bad:?}");
        // The shape is checked before the allow list, too.
        let code = b.call_err(
            "fetch-peer-file",
            json!({"peer": silent.addr(), "handle": bad}),
        );
        assert_eq!(code, "malformed_handle", "handle {bad:?} to a silent peer");
    }
    silent.assert_untouched("a malformed handle");

    for input in [
        json!({"peer": a.addr()}),
        json!({"handle": handle}),
        json!({"peer": "", "handle": handle}),
        json!({"peer": a.addr(), "handle": " "}),
    ] {
        let code = b.call_err("fetch-peer-file", input.clone());
        assert_eq!(code, "invalid_input", "input {input}");
    }

    assert_eq!(
        a.events("peer_handle_redeem").len(),
        redeems_before,
        "no refused fetch reached A's peer plane"
    );
    let fetches = b.events("peer_file_fetch");
    let mut want = vec!["peer_not_allowed".to_owned(); not_allowed.len()];
    want.extend(vec!["malformed_handle".to_owned(); 8]);
    assert_eq!(outcomes(&fetches), want, "B's fetch lines");
    assert_eq!(fetches[0]["handle_id"], handle_id.as_str());
    assert!(
        landed(&b.workdir()).is_empty(),
        "no refused fetch landed anything in peer-in/"
    );

    // The same handle still works from the allowed address.
    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(fetched["sha256"], sha256_hex(REPORT));
    assert_eq!(outcomes(&a.events("peer_handle_redeem")), ["ok"]);
}

/// Scenario 6a: an escaping or missing path fails the mint before any card fetch.
#[test]
fn share_file_path_refusals_open_no_connection() {
    let world = Workdir::new("");
    let (mut a, _b) = minter_and_fetcher(&world, Some("15m"));
    std::fs::write(world.at("secret.txt"), SECRET).expect("write the secret");
    std::os::unix::fs::symlink("/etc/passwd", a.workdir().join("out/abs-link"))
        .expect("absolute symlink");
    std::os::unix::fs::symlink("../../secret.txt", a.workdir().join("out/rel-link"))
        .expect("relative symlink");
    std::os::unix::fs::symlink(world.at("secret.txt"), a.workdir().join("out/abs-secret"))
        .expect("absolute symlink to the secret");
    let silent = SilentPeer::new();

    let cases = [
        ("../x", "outside_root"),
        ("%2e%2e/x", "outside_root"),
        ("%2E%2E/secret.txt", "outside_root"),
        ("/etc/passwd", "outside_root"),
        ("a/../report.md", "outside_root"),
        ("./report.md", "outside_root"),
        ("abs-link", "outside_root"),
        ("rel-link", "outside_root"),
        ("abs-secret", "outside_root"),
        ("missing.md", "not_found"),
        // D-9.2 resolves by D-2.1 too: the first `?` cuts the path before anything else.
        ("../x?report.md", "outside_root"),
        ("missing.md?report.md", "not_found"),
    ];
    for (path, want) in cases {
        let code = a.call_err("share-file", json!({"path": path, "peer": silent.addr()}));
        assert_eq!(code, want, "path {path:?}");
        silent.assert_untouched(&format!("share-file of {path:?}"));
    }
    let mints = a.events("peer_handle_mint");
    let want: Vec<&str> = cases.iter().map(|(_, code)| *code).collect();
    assert_eq!(outcomes(&mints), want, "one mint line per refused attempt");
    for (mint, (path, _)) in mints.iter().zip(cases) {
        assert_eq!(
            mint["path"], path,
            "a refused mint records the path as requested"
        );
        assert_eq!(mint["audience"], Value::Null, "no audience derived: {mint}");
        assert_eq!(mint["handle_id"], Value::Null, "no handle minted: {mint}");
        assert!(mint["reason"].is_string(), "a refusal has a reason: {mint}");
    }
}

/// D-9.2 resolves the path by D-2.1 to D-2.6: the first `?` cuts it, so `report.md?v=2`
/// shares `report.md`, and the handle names that file.
#[test]
fn share_file_cuts_the_path_at_its_first_question_mark() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, None);
    let result = a.call_ok(
        "share-file",
        json!({"path": "report.md?v=2", "peer": b.addr()}),
    );
    let (handle, _) = check_share_result(&result, b.audience());
    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(fetched["sha256"], sha256_hex(REPORT));
    let stored = fetched["path"].as_str().expect("stored path");
    assert!(stored.ends_with("-report.md"), "stored as {stored}");
}

/// Scenario 6b: a peer outside `network.allow`, a down peer, and a card without a name are all
/// `peer_unreachable`.
#[test]
fn share_file_peer_refusals_are_peer_unreachable() {
    let world = Workdir::new("");
    let (mut a, _b) = minter_and_fetcher(&world, Some("15m"));
    let silent = SilentPeer::new();

    // Not in network.allow (host compared exactly: localhost is not 127.0.0.1).
    for peer in [
        format!("localhost:{}", silent.port()),
        format!("127.0.0.2:{}", silent.port()),
    ] {
        let code = a.call_err("share-file", json!({"path": "report.md", "peer": peer}));
        assert_eq!(code, "peer_unreachable", "peer {peer}");
    }
    silent.assert_untouched("a peer outside network.allow");

    // Down.
    let down = format!("127.0.0.1:{}", closed_port());
    let code = a.call_err("share-file", json!({"path": "report.md", "peer": down}));
    assert_eq!(code, "peer_unreachable", "a closed port");

    // Reachable, but the card cannot name an audience.
    let nameless = CardServer::new(|addr| json!({"url": format!("http://{addr}")}).to_string());
    let urlless = CardServer::new(|_| json!({"name": "ghost"}).to_string());
    let not_json = CardServer::new(|_| "<html>hello</html>".to_owned());
    for (server, what) in [
        (&nameless, "card without name"),
        (&urlless, "card without url"),
        (&not_json, "card not JSON"),
    ] {
        let code = a.call_err(
            "share-file",
            json!({"path": "report.md", "peer": server.peer()}),
        );
        assert_eq!(code, "peer_unreachable", "{what}");
        assert_eq!(
            server.hits(),
            1,
            "{what}: the card was fetched exactly once"
        );
    }

    let mints = a.events("peer_handle_mint");
    assert_eq!(outcomes(&mints), vec!["peer_unreachable"; 6]);
    for mint in &mints {
        assert_eq!(mint["path"], "report.md");
        assert_eq!(mint["audience"], Value::Null, "no audience derived: {mint}");
        assert_eq!(mint["handle_id"], Value::Null);
    }
}

/// Scenario 7: ending A's session revokes every handle; a new session over the same workdir and
/// the same address does not honour them.
#[test]
fn handle_from_an_ended_session_is_not_valid_in_the_next() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, Some("15m"));
    let (handle, handle_id) = share(&mut a, &b);
    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(fetched["bytes"], REPORT.len());

    let old_addr = a.addr();
    let old_session = a.session_id().to_owned();
    let workdir = a.workdir().clone();
    // SIGTERM ends the session; stdin is closed too so that this test does not depend on
    // `sigterm_ends_a_console_session_whose_stdin_is_still_open`.
    a.signal(rustix::process::Signal::TERM);
    a.close_stdin();
    let status = a.wait_exit("SIGTERM and end of stdin");
    assert_eq!(status.code(), Some(0), "A exits 0 after SIGTERM");
    drop(a);

    let mut a2 = spawn(
        &world,
        "a2",
        &workdir,
        &minter_manifest(Some("15m")),
        &old_addr,
    );
    assert_eq!(a2.addr(), old_addr, "A' listens on A's old address");
    assert_ne!(a2.session_id(), old_session, "a new session id");

    let code = b.call_err(
        "fetch-peer-file",
        json!({"peer": old_addr, "handle": handle}),
    );
    assert_eq!(code, "handle_not_valid", "an ended session's handle");
    let redeems = a2.events("peer_handle_redeem");
    assert_eq!(outcomes(&redeems), ["handle_not_valid"]);
    assert_eq!(redeems[0]["handle_id"], handle_id.as_str());
    assert_eq!(redeems[0]["path"], Value::Null);

    // A' mints its own working handle: the refusal was the revocation, not a broken capsule.
    let (fresh, fresh_id) = share(&mut a2, &b);
    assert_ne!(fresh_id, handle_id);
    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": old_addr, "handle": fresh}),
    );
    assert_eq!(fetched["generation"], 0, "a relaunched process reports 0");
    assert_eq!(
        outcomes(&b.events("peer_file_fetch")),
        ["ok", "handle_not_valid", "ok"]
    );
}

/// Scenario 8a: a `peer-in` symlink leading out of the workdir is never followed.
#[test]
fn fetch_refuses_a_peer_in_symlink_out_of_the_workdir() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, Some("15m"));
    let outside = world.at("outside");
    std::fs::create_dir(&outside).expect("create the outside directory");
    remove_empty_landing(&b.workdir());
    std::os::unix::fs::symlink(&outside, b.workdir().join("peer-in")).expect("peer-in symlink");
    let (handle, _) = share(&mut a, &b);

    let code = b.call_err(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(code, "path_refused");
    assert!(
        tree(&outside).is_empty(),
        "nothing landed in the symlink's target: {:?}",
        tree(&outside)
    );
    assert_eq!(
        tree(&b.workdir()),
        ["peer-in"],
        "no temp file left in B's workdir"
    );
    let meta = std::fs::symlink_metadata(b.workdir().join("peer-in")).expect("peer-in");
    assert!(
        meta.file_type().is_symlink(),
        "peer-in is still the symlink"
    );
    let fetches = b.events("peer_file_fetch");
    assert_eq!(outcomes(&fetches), ["path_refused"]);
    assert_eq!(fetches[0]["stored_path"], Value::Null);
}

/// Scenario 8b: a `peer-in` that is a regular file, or a dangling symlink, refuses the landing.
#[test]
fn fetch_refuses_a_peer_in_that_is_not_a_directory() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, Some("15m"));
    let (handle, _) = share(&mut a, &b);
    let peer_in = b.workdir().join("peer-in");
    remove_empty_landing(&b.workdir());

    std::fs::write(&peer_in, b"not a directory\n").expect("peer-in as a file");
    let code = b.call_err(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(code, "path_refused", "peer-in is a regular file");
    assert_eq!(tree(&b.workdir()), ["peer-in"]);
    assert_eq!(
        std::fs::read(&peer_in).expect("peer-in"),
        b"not a directory\n",
        "the file is untouched"
    );

    std::fs::remove_file(&peer_in).expect("remove peer-in");
    let dangling = world.at("nowhere");
    std::os::unix::fs::symlink(&dangling, &peer_in).expect("dangling peer-in");
    let code = b.call_err(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(code, "path_refused", "peer-in is a dangling symlink");
    assert!(!dangling.exists(), "the dangling target was not created");
    assert_eq!(tree(&b.workdir()), ["peer-in"]);
    assert_eq!(
        outcomes(&b.events("peer_file_fetch")),
        ["path_refused", "path_refused"]
    );
}

/// Scenario 9: after share → fetch → tamper → wrong audience, no trace and no stderr holds a
/// token, and every trace line is well-formed JSON.
#[test]
fn tokens_never_reach_traces_or_stderr() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, Some("15m"));
    let mut c = spawn(
        &world,
        "c",
        &world.workdir("c"),
        &fetcher_manifest("fetcher-c", &a.addr()),
        "127.0.0.1:0",
    );
    let (handle, handle_id) = share(&mut a, &b);
    b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );

    // Tamper with the payload and with the MAC.
    let parts: Vec<&str> = handle.split('.').collect();
    let flip = |s: &str| {
        let mut chars: Vec<char> = s.chars().collect();
        chars[0] = if chars[0] == 'A' { 'B' } else { 'A' };
        chars.into_iter().collect::<String>()
    };
    let tampered_payload = format!("{}.{}.{}", parts[0], flip(parts[1]), parts[2]);
    let tampered_mac = format!("{}.{}.{}", parts[0], parts[1], flip(parts[2]));
    for tampered in [&tampered_payload, &tampered_mac] {
        let code = b.call_err(
            "fetch-peer-file",
            json!({"peer": a.addr(), "handle": tampered}),
        );
        assert!(
            code == "handle_not_valid" || code == "malformed_handle",
            "a tampered token is refused, got {code}"
        );
    }
    // The right token with the wrong audience, and a token where a peer or path belongs.
    assert_eq!(
        c.call_err(
            "fetch-peer-file",
            json!({"peer": a.addr(), "handle": handle})
        ),
        "handle_not_valid"
    );
    assert_eq!(
        b.call_err("fetch-peer-file", json!({"peer": handle, "handle": handle})),
        "peer_not_allowed"
    );
    assert_eq!(
        a.call_err("share-file", json!({"path": handle, "peer": b.addr()})),
        "not_found"
    );
    let redeems = a.events("peer_handle_redeem");
    assert_eq!(redeems.len(), 4, "ok, two tampers, C: {redeems:?}");
    assert_eq!(redeems[0]["handle_id"], handle_id.as_str());

    for capsule in [&a, &b, &c] {
        assert_trace_well_formed(capsule);
    }
    let files = world.logs_and_traces();
    assert_eq!(
        files.len(),
        6,
        "three traces and three stderr captures: {files:?}"
    );
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a trace or log");
        assert!(
            !text.contains("mh1."),
            "{} holds a token:\n{text}",
            file.display()
        );
        assert!(
            !text.contains(&parts[2][..16]),
            "{} holds a MAC fragment",
            file.display()
        );
        // Logs captured to a file are plain text: no terminal colour codes.
        assert!(
            !text.contains('\x1b'),
            "{} holds escape sequences",
            file.display()
        );
    }
}

/// contract.md: "SIGINT or SIGTERM ends the session gracefully … and exits 0", whether or not a
/// console is attached; and "End of stdin ends the session as SIGTERM does".
#[test]
fn sigterm_ends_a_console_session_whose_stdin_is_still_open() {
    let world = Workdir::new("");
    let (mut a, _b) = minter_and_fetcher(&world, Some("15m"));
    a.signal(rustix::process::Signal::TERM);
    let status = a.wait_exit("SIGTERM with the console's stdin still open");
    assert_eq!(status.code(), Some(0), "exit status after SIGTERM");
}

/// A signal during a tool call ends the session gracefully: the call in flight finishes within
/// the drain deadline, its answer is written and its trace line left (D-9.3), and only then
/// does the process exit 0. No further console line is read.
#[test]
fn sigterm_during_a_tool_call_still_answers_it() {
    let world = Workdir::new("");
    let (mut a, _b) = minter_and_fetcher(&world, Some("15m"));
    let slow = CardServer::slow(Duration::from_millis(1500), |addr| {
        json!({"name": "slow", "url": format!("http://{addr}")}).to_string()
    });
    let stdin = a.stdin.as_mut().expect("stdin open");
    let call = json!({"op": "call", "tool": "share-file",
                      "input": {"path": "report.md", "peer": slow.peer()}});
    writeln!(stdin, "{call}").expect("send the call");
    stdin.flush().expect("flush");
    // The signal comes while the call waits on the card: once the card server has the request.
    let asked = Instant::now();
    while slow.hits() == 0 {
        assert!(
            asked.elapsed() < ANSWER_DEADLINE,
            "the card was never fetched"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    a.signal(rustix::process::Signal::TERM);
    // Sent after the signal: never read, never answered.
    let stdin = a.stdin.as_mut().expect("stdin open");
    let _ = writeln!(stdin, "{}", json!({"op": "tools"}));
    let _ = stdin.flush();
    let answer: Value =
        serde_json::from_str(&a.next_line("the in-flight call's answer")).expect("an answer line");
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(
        answer["result"]["audience"],
        format!("slow@{}", slow.peer())
    );
    let status = a.wait_exit("SIGTERM during a call");
    assert_eq!(status.code(), Some(0));
    assert!(
        a.line(Duration::from_millis(200)).is_none(),
        "nothing answers the line sent after the signal"
    );
    assert_eq!(outcomes(&a.events("peer_handle_mint")), ["ok"]);
}

#[test]
fn end_of_console_input_ends_the_session_with_status_zero() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, Some("15m"));
    let (handle, _) = share(&mut a, &b);
    let addr = a.addr();
    a.close_stdin();
    let status = a.wait_exit("end of stdin");
    assert_eq!(status.code(), Some(0), "exit status after end of stdin");
    let code = b.call_err("fetch-peer-file", json!({"peer": addr, "handle": handle}));
    assert_eq!(
        code, "peer_unreachable",
        "the ended capsule no longer listens"
    );
}

/// A handle's `p` is canonicalised at mint time (spec, §The handle): shared through a symlink,
/// the handle names the file itself, so the fetched file is named after it, and pointing the
/// symlink elsewhere after the mint does not point the handle elsewhere.
#[test]
fn a_handle_shared_through_a_symlink_names_the_file_itself() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, None);
    let out = world.at("work-a").join("out");
    std::fs::write(out.join("other.md"), b"another file\n").expect("other.md");
    std::os::unix::fs::symlink("report.md", out.join("alias")).expect("alias");
    let result = a.call_ok("share-file", json!({"path": "alias", "peer": b.addr()}));
    let (handle, handle_id) = check_share_result(&result, b.audience());

    std::fs::remove_file(out.join("alias")).expect("remove alias");
    std::os::unix::fs::symlink("other.md", out.join("alias")).expect("re-point alias");
    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(fetched["path"], format!("peer-in/{handle_id}-report.md"));
    assert_eq!(fetched["sha256"], sha256_hex(REPORT), "report.md's bytes");
    let minted = a.events("peer_handle_mint");
    assert_eq!(minted.last().expect("a mint line")["path"], "report.md");
}

/// A token percent-encoded into `share-file`'s path (`mh1%2E<payload>%2E<mac>`, or one dot
/// encoded) is decoded for the trace's redaction, as a read's path is: the refused mint's line
/// holds no piece of it (D-6.5).
#[test]
fn an_encoded_token_in_a_shared_path_never_reaches_the_trace() {
    let world = Workdir::new("");
    let (mut a, b) = minter_and_fetcher(&world, None);
    let (payload, mac) = ("eyJ2IjoxfQ", "c2VjcmV0LW1hYy1ieXRlcy1mb3ItdGhlLXRlc3Q");
    for path in [
        format!("mh1%2E{payload}%2E{mac}"),
        format!("%6Dh1.{payload}.{mac}"),
        format!("mh1.{payload}%2E{mac}"),
    ] {
        let code = a.call_err("share-file", json!({"path": path, "peer": b.addr()}));
        assert_eq!(code, "not_found", "{path}");
    }
    let lines = a.events("peer_handle_mint");
    assert_eq!(lines.len(), 3);
    for line in &lines {
        let text = line.to_string();
        assert!(
            !text.contains(payload) && !text.contains(mac),
            "token material in the trace: {text}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Authenticated audience (D-14) between `serve` processes.
// ---------------------------------------------------------------------------------------------

/// One plain-http GET over loopback with extra header lines; returns `(status, body)`.
fn http_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, Vec<u8>) {
    let mut all = vec![("host", addr), ("connection", "close")];
    all.extend_from_slice(headers);
    let request = support::http::request_bytes("GET", path, &all);
    let reply = support::http::exchange(addr, &request, ANSWER_DEADLINE);
    (reply.status, reply.body)
}

/// D-14: share and fetch between two `serve` processes prove the audience on both trace sides
/// of the minter (mint and redeem lines say `ed25519`); a third party holding the token and
/// asserting the right audience is refused with and without a proof of its own.
#[test]
fn a_proved_share_and_fetch_and_a_third_party_refused_with_and_without_its_own_proof() {
    let world = Workdir::new("");
    let (mut a, mut b) = minter_and_fetcher(&world, None);

    // B's card publishes its identity key; A (no peer_fetch) publishes none.
    let (status, body) = http_get(&b.addr(), "/.well-known/agent-card.json", &[]);
    assert_eq!(status, 200);
    let card: Value = serde_json::from_slice(&body).expect("a JSON card");
    let extension = &card["capabilities"]["extensions"][0];
    assert_eq!(extension["uri"], "urn:resource-plane:peer-proof:v2");
    assert_eq!(extension["required"], false);
    assert_eq!(extension["params"]["alg"], "Ed25519");
    let b_key = extension["params"]["key"]
        .as_str()
        .expect("a key")
        .to_owned();
    assert_eq!(b_key.len(), 43, "32 bytes in unpadded base64url: {b_key}");
    let (_, body) = http_get(&a.addr(), "/.well-known/agent-card.json", &[]);
    let a_card: Value = serde_json::from_slice(&body).expect("a JSON card");
    assert_eq!(
        a_card["capabilities"],
        serde_json::json!({}),
        "a keyless card publishes no extension: {a_card}"
    );

    let (handle, handle_id) = share(&mut a, &b);
    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(fetched["sha256"], sha256_hex(REPORT));
    let mint = &a.events("peer_handle_mint")[0];
    assert_eq!(
        mint["audience"],
        b.audience(),
        "the line's audience is plain"
    );
    assert_eq!(mint["audience_proof"], "ed25519");
    let redeem = &a.events("peer_handle_redeem")[0];
    assert_eq!(redeem["outcome"], "ok");
    assert_eq!(redeem["handle_id"], handle_id.as_str());
    assert_eq!(redeem["audience_proof"], "ed25519");
    assert_eq!(b.events("peer_file_fetch")[0]["outcome"], "ok");

    // A third party with the token and B's audience: no proof, then a proof by its own key.
    let path = format!("/resources/peer/{handle}");
    let (status, refused) = http_get(&a.addr(), &path, &[("x-murmur-audience", b.audience())]);
    assert_eq!(status, 403);
    let refused: Value = serde_json::from_slice(&refused).expect("JSON");
    assert_eq!(refused["error"], "handle_not_valid");
    let mallory = Signer::new([0x4d; 32]);
    let proof = mallory.proof(&origin(&a), &handle, now_ms(), [1; 16]);
    let (status, body) = http_get(
        &a.addr(),
        &path,
        &[
            ("x-murmur-audience", b.audience()),
            ("x-murmur-proof", &proof),
        ],
    );
    assert_eq!(status, 403);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        refused,
        "same refusal"
    );
    // The same with B's key named but Mallory's signature: the MAC verifies, the proof fails.
    let forged = proof.replace(&mallory.key, &b_key);
    let (status, body) = http_get(
        &a.addr(),
        &path,
        &[
            ("x-murmur-audience", b.audience()),
            ("x-murmur-proof", &forged),
        ],
    );
    assert_eq!(status, 403);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        refused,
        "same refusal"
    );
    let redeems = a.events("peer_handle_redeem");
    assert_eq!(
        outcomes(&redeems),
        [
            "ok",
            "handle_not_valid",
            "handle_not_valid",
            "handle_not_valid"
        ]
    );
    for line in &redeems[1..3] {
        assert_eq!(
            line["path"],
            Value::Null,
            "a failed MAC names no path: {line}"
        );
        assert_eq!(line["audience_proof"], Value::Null, "{line}");
        assert_eq!(line["audience_asserted"], b.audience());
    }
    assert_eq!(redeems[3]["path"], "report.md", "the MAC verified");
    assert_eq!(redeems[3]["audience_proof"], "ed25519");
    assert!(
        redeems[3]["reason"].as_str().unwrap().contains("signature"),
        "{}",
        redeems[3]
    );
    assert_trace_well_formed(&a);
    assert_trace_well_formed(&b);
}

/// D-14: a peer whose card publishes a key the test holds redeems with fresh proofs; a replayed,
/// stale or future proof is refused with the same 403, its line naming the check.
#[test]
fn stale_future_and_replayed_proofs_are_refused_by_a_serve_process() {
    let world = Workdir::new("");
    let mut a = spawn(
        &world,
        "a",
        &minter_workdir(&world, "a"),
        &minter_manifest(None),
        "127.0.0.1:0",
    );
    let key = Signer::new([0x33; 32]);
    let peer = CardServer::new(|addr| key.card("tester", addr));
    let result = a.call_ok(
        "share-file",
        json!({"path": "report.md", "peer": peer.peer()}),
    );
    let audience = format!("tester@{}", peer.peer());
    let (handle, _) = check_share_result(&result, &audience);
    assert_eq!(a.events("peer_handle_mint")[0]["audience_proof"], "ed25519");
    let path = format!("/resources/peer/{handle}");
    let redeem = |proof: &str| {
        http_get(
            &a.addr(),
            &path,
            &[("x-murmur-audience", &audience), ("x-murmur-proof", proof)],
        )
    };
    let a_origin = origin(&a);
    let fresh = key.proof(&a_origin, &handle, now_ms(), [7; 16]);
    let (status, body) = redeem(&fresh);
    assert_eq!(status, 200);
    assert_eq!(body, REPORT);
    let (status, refused) = redeem(&fresh);
    assert_eq!(status, 403, "a replay");
    for (t, n) in [(now_ms() - 61_000, [8; 16]), (now_ms() + 61_000, [9; 16])] {
        let (status, body) = redeem(&key.proof(&a_origin, &handle, t, n));
        assert_eq!(status, 403, "t = {t}");
        assert_eq!(body, refused, "byte-identical bodies");
    }
    let (status, _) = redeem(&key.proof(&a_origin, &handle, now_ms(), [10; 16]));
    assert_eq!(status, 200, "a fresh nonce still redeems");
    let lines = a.events("peer_handle_redeem");
    assert_eq!(
        outcomes(&lines),
        [
            "ok",
            "handle_not_valid",
            "handle_not_valid",
            "handle_not_valid",
            "ok"
        ]
    );
    for (line, check) in lines[1..4].iter().zip(["replayed", "fresh", "fresh"]) {
        assert_eq!(line["path"], "report.md", "{line}");
        assert_eq!(line["audience_proof"], "ed25519", "{line}");
        assert!(line["reason"].as_str().unwrap().contains(check), "{line}");
    }
}

/// D-14.3.1, three capsules: minter A, fetcher B, and a hostile relay R on B's allow list. B,
/// told to fetch A's handle from R, sends R the token, its audience and a proof; R replays all
/// three to A and is refused with a 403 byte-identical to a forgery's (all but `date` and the
/// handle id), A's line naming the origin check; B's own fetch from A is served.
///
/// Under peer-proof v1 the proof signed only the handle id, `t` and `n`: R's replay verified at
/// A (the right key, fresh, a nonce A had never seen) and R got the file. Run against such a
/// build (`RP_BIN`), this test fails.
#[test]
fn a_proof_relayed_by_a_hostile_peer_is_refused_and_the_direct_fetch_is_served() {
    let world = Workdir::new("");
    let mut a = spawn(
        &world,
        "a",
        &minter_workdir(&world, "a"),
        &minter_manifest(None),
        "127.0.0.1:0",
    );
    let relay = RecordingPeer::new(404, r#"{"error":"not_found","message":"no such file"}"#);
    let fetcher_yaml = format!(
        "name: fetcher-b\ncapabilities:\n  peer_fetch: {{ allow: [\"{}\", \"{}\"] }}\n",
        a.addr(),
        relay.peer()
    );
    let mut b = spawn(
        &world,
        "b",
        &world.workdir("b"),
        &fetcher_yaml,
        "127.0.0.1:0",
    );
    let (handle, handle_id) = share(&mut a, &b);
    assert_eq!(a.events("peer_handle_mint")[0]["audience_proof"], "ed25519");

    // B, told to fetch from R, sends R everything a redeem carries.
    assert_eq!(
        b.call_err(
            "fetch-peer-file",
            json!({"peer": relay.peer(), "handle": handle})
        ),
        "not_found"
    );
    let captured = relay.requests();
    assert_eq!(captured.len(), 1, "{captured:?}");
    let captured = &captured[0];
    assert_eq!(captured.target, format!("/resources/peer/{handle}"));
    let audience = captured.values("x-murmur-audience");
    assert_eq!(audience, [b.audience()]);
    let proof = captured.values("x-murmur-proof");
    assert_eq!(proof.len(), 1, "{captured:?}");
    let proof = proof[0];

    // The reference: the same payload under an all-zero MAC, with B's audience and no proof.
    let payload = handle.split('.').nth(1).expect("a payload segment");
    let forged = format!("mh1.{payload}.{}", "A".repeat(43));
    let ask = |target: &str, headers: &[(&str, &str)]| {
        let host = a.addr();
        let mut all = vec![("host", host.as_str()), ("connection", "close")];
        all.extend_from_slice(headers);
        support::http::request(a.addr().as_str(), "GET", target, &all)
    };
    let reference = ask(
        &format!("/resources/peer/{forged}"),
        &[("x-murmur-audience", b.audience())],
    );
    reference.assert_refusal(403, "handle_not_valid", "the forged reference");

    // R replays token, audience and proof to A.
    let relayed = ask(
        &captured.target,
        &[
            ("x-murmur-audience", audience[0]),
            ("x-murmur-proof", proof),
        ],
    );
    relayed.assert_refusal(403, "handle_not_valid", "the relayed proof");
    let comparable = |reply: &support::http::Reply| {
        let mut headers: Vec<(String, String)> = reply
            .sorted_headers()
            .into_iter()
            .filter(|(name, _)| name != "date")
            .map(|(name, value)| match name.as_str() {
                "x-murmur-handle-id" => (name, String::new()),
                _ => (name, value),
            })
            .collect();
        headers.sort();
        (reply.status, headers, reply.body.clone())
    };
    assert_eq!(
        comparable(&relayed),
        comparable(&reference),
        "the relayed proof's refusal is byte-identical to a forgery's"
    );
    assert_eq!(
        relayed.header("x-murmur-handle-id"),
        Some(handle_id.as_str())
    );
    let line = a.events("peer_handle_redeem").pop().expect("a redeem line");
    assert_eq!(line["outcome"], "handle_not_valid");
    assert_eq!(line["reason"], "proof addressed to another origin");
    assert_eq!(line["handle_id"], handle_id.as_str());
    assert_eq!(
        line["path"], "report.md",
        "the MAC verified: the key is B's"
    );
    assert_eq!(line["audience_proof"], "ed25519");
    assert!(
        proof.contains(&format!(";o=http://{};", relay.peer())),
        "the proof names the relay it was sent to: {proof}"
    );

    // B's own fetch from A is served.
    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": a.addr(), "handle": handle}),
    );
    assert_eq!(fetched["sha256"], sha256_hex(REPORT));
    assert_eq!(
        outcomes(&a.events("peer_handle_redeem")),
        ["handle_not_valid", "handle_not_valid", "ok"],
        "the forgery, the relay, the direct fetch"
    );
    assert_eq!(b.events("peer_file_fetch")[1]["outcome"], "ok");
    assert_trace_well_formed(&a);
}

/// D-14 interop: a keyless peer (a card without the extension, no proof header) is minted for
/// and redeems as before; `require_peer_proof: true` refuses it with `peer_not_authenticated`.
#[test]
fn keyless_peers_interoperate_unless_the_minter_requires_a_proof() {
    let world = Workdir::new("");
    let mut a = spawn(
        &world,
        "a",
        &minter_workdir(&world, "a"),
        &minter_manifest(None),
        "127.0.0.1:0",
    );
    let keyless =
        CardServer::new(|addr| json!({"name": "old", "url": format!("http://{addr}")}).to_string());
    let result = a.call_ok(
        "share-file",
        json!({"path": "report.md", "peer": keyless.peer()}),
    );
    let audience = format!("old@{}", keyless.peer());
    let (handle, _) = check_share_result(&result, &audience);
    let (status, body) = http_get(
        &a.addr(),
        &format!("/resources/peer/{handle}"),
        &[("x-murmur-audience", &audience)],
    );
    assert_eq!(status, 200);
    assert_eq!(body, REPORT);
    assert_eq!(a.events("peer_handle_mint")[0]["audience_proof"], "none");
    assert_eq!(a.events("peer_handle_redeem")[0]["audience_proof"], "none");

    let strict_manifest = "name: minter\n\
         exports:\n  peer_files: { root: out/, require_peer_proof: true }\n\
         capabilities:\n  network: { allow: [\"127.0.0.1\"] }\n";
    let mut strict = spawn(
        &world,
        "strict",
        &minter_workdir(&world, "strict"),
        strict_manifest,
        "127.0.0.1:0",
    );
    assert_eq!(
        strict.call_err(
            "share-file",
            json!({"path": "report.md", "peer": keyless.peer()})
        ),
        "peer_not_authenticated"
    );
    let line = &strict.events("peer_handle_mint")[0];
    assert_eq!(line["outcome"], "peer_not_authenticated");
    assert_eq!(line["audience"], audience.as_str());
    assert_eq!(line["audience_proof"], "none");
    // A real fetcher's card carries a key: the strict minter mints for it, and it fetches.
    let mut b = spawn(
        &world,
        "b",
        &world.workdir("b"),
        &fetcher_manifest("fetcher-b", &strict.addr()),
        "127.0.0.1:0",
    );
    let (handle, _) = share(&mut strict, &b);
    let fetched = b.call_ok(
        "fetch-peer-file",
        json!({"peer": strict.addr(), "handle": handle}),
    );
    assert_eq!(fetched["sha256"], sha256_hex(REPORT));
}

// ---------------------------------------------------------------------------------------------
// Capsules and checks.
// ---------------------------------------------------------------------------------------------

/// A workdir `work-<label>` holding `out/report.md`.
fn minter_workdir(world: &Workdir, label: &str) -> PathBuf {
    let dir = world.workdir(label);
    std::fs::create_dir(dir.join("out")).expect("create out/");
    std::fs::write(dir.join("out/report.md"), REPORT).expect("write out/report.md");
    dir
}

fn minter_manifest(max_ttl: Option<&str>) -> String {
    let ttl = max_ttl.map_or(String::new(), |t| format!(", max_ttl: {t}"));
    format!(
        "name: minter\n\
         exports:\n  peer_files: {{ root: out/{ttl} }}\n\
         capabilities:\n  network: {{ allow: [\"127.0.0.1\"] }}\n"
    )
}

fn fetcher_manifest(name: &str, allow: &str) -> String {
    format!("name: {name}\ncapabilities:\n  peer_fetch: {{ allow: [\"{allow}\"] }}\n")
}

/// Spawns `serve --console` over `workdir` listening on `listen` (logging at debug), and reads
/// its ready line, which must name its url, audience, session id and trace.
fn spawn(world: &Workdir, label: &str, workdir: &Path, manifest: &str, listen: &str) -> Served {
    let args: Vec<String> = [
        "serve",
        "--workdir",
        &workdir.display().to_string(),
        "--manifest",
        &world.manifest_for(label, manifest).display().to_string(),
        "--listen",
        listen,
        "--trace",
        &world.trace_for(label).display().to_string(),
        "--console",
    ]
    .map(str::to_owned)
    .to_vec();
    let capsule = Launch::new(&args)
        .label(label)
        .env("RESOURCE_PLANE_LOG", "debug")
        .stdin()
        .stderr(Stderr::File(world.log_for(label)))
        .start();
    for key in ["url", "audience", "session_id", "trace"] {
        assert!(
            capsule.ready[key].is_string(),
            "{label}: ready line lacks `{key}`: {}",
            capsule.ready_line
        );
    }
    capsule
}

/// The origin peers reach `capsule` at, as a proof names it (D-14.3.1).
fn origin(capsule: &Served) -> String {
    format!("http://{}", capsule.addr())
}

fn now_ms() -> i64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis();
    i64::try_from(ms).expect("milliseconds fit i64")
}

fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

fn outcomes(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["outcome"].as_str().unwrap_or("<none>").to_owned())
        .collect()
}

/// Checks a successful `share-file` result and returns `(handle, handle_id)`.
fn check_share_result(result: &Value, audience: &str) -> (String, String) {
    assert_eq!(
        keys(result),
        ["audience", "expires_at_ms", "handle", "handle_id"],
        "share-file result keys: {result}"
    );
    assert_eq!(
        result["audience"], audience,
        "share-file audience: {result}"
    );
    let handle = result["handle"].as_str().expect("handle string").to_owned();
    assert!(handle.starts_with("mh1."), "handle shape: {handle}");
    assert_eq!(handle.split('.').count(), 3, "handle has three segments");
    let handle_id = result["handle_id"].as_str().expect("handle_id").to_owned();
    assert_eq!(
        handle_id,
        sha256_hex(handle.as_bytes())[..16],
        "handle_id is the first 16 hex of sha256(token)"
    );
    (handle, handle_id)
}

/// `expires_at_ms - now` must be `want_ms` within [`TTL_SLACK_MS`].
fn assert_expires_in(result: &Value, want_ms: i64, what: &str) {
    let expires = result["expires_at_ms"]
        .as_i64()
        .unwrap_or_else(|| panic!("{what}: expires_at_ms not an integer: {result}"));
    let left = expires - now_ms();
    assert!(
        (left - want_ms).abs() <= TTL_SLACK_MS,
        "{what}: expires in {left} ms, want {want_ms} ± {TTL_SLACK_MS}"
    );
}

/// The trace envelope (D-6.1) on every line of `capsule`'s trace.
fn assert_trace_well_formed(capsule: &Served) {
    let lines = capsule.trace_lines();
    assert!(!lines.is_empty(), "{}: trace is empty", capsule.label);
    for line in &lines {
        let event_id = line["event_id"].as_str().unwrap_or("");
        assert!(
            event_id.starts_with("evt_") && is_lower_hex(&event_id[4..], 32),
            "{}: event_id in {line}",
            capsule.label
        );
        assert_eq!(
            line["session_id"],
            capsule.session_id(),
            "{}: session_id in {line}",
            capsule.label
        );
        assert!(
            line["timestamp"].is_i64(),
            "{}: timestamp in {line}",
            capsule.label
        );
        assert!(
            line["event_type"].is_string(),
            "{}: event_type",
            capsule.label
        );
    }
}

/// Starts A (minter) and B (fetcher allowed to A).
fn minter_and_fetcher(world: &Workdir, max_ttl: Option<&str>) -> (Served, Served) {
    let a = spawn(
        world,
        "a",
        &minter_workdir(world, "a"),
        &minter_manifest(max_ttl),
        "127.0.0.1:0",
    );
    let b = spawn(
        world,
        "b",
        &world.workdir("b"),
        &fetcher_manifest("fetcher-b", &a.addr()),
        "127.0.0.1:0",
    );
    (a, b)
}

fn share(a: &mut Served, peer: &Served) -> (String, String) {
    let result = a.call_ok(
        "share-file",
        json!({"path": "report.md", "peer": peer.addr()}),
    );
    check_share_result(&result, peer.audience())
}

/// The names under `workdir/peer-in/`; empty when it does not exist. A confined `serve` creates
/// the (empty) directory at launch so that its Landlock wall can grant writing beneath it.
fn landed(workdir: &Path) -> Vec<String> {
    match std::fs::read_dir(workdir.join("peer-in")) {
        Ok(entries) => entries
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("peer-in: {e}"),
    }
}

/// Removes the empty `peer-in/` a confined launch made, so that a test can put something else
/// in its place (the agent shares the workdir and can do the same).
fn remove_empty_landing(workdir: &Path) {
    assert!(landed(workdir).is_empty(), "peer-in/ holds nothing yet");
    match std::fs::remove_dir(workdir.join("peer-in")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove peer-in: {e}"),
    }
}
