//! `resource-plane demo`: two capsules on loopback in a fresh temporary directory. An operator
//! lists and reads capsule A's export; A shares a file with B by handle, bound to the identity
//! key B's card publishes (D-14); B fetches it, proving the redeem with that key; a forged
//! handle is refused, and so is the real handle replayed with B's audience but without B's key;
//! both traces are summarised. Exits 0 only when every step behaved as the spec says. Logs name
//! handles by `handle_id`, never by token.

use crate::backends::tls::PeerTls;
use crate::backends::{JsonlTraceSink, OsFilesystem, SystemClock};
use crate::confine::{Confinement, ConfinementReport};
use crate::http::client::{
    Credentials, Limits, PeerClient, PeerResponse, PeerTimeouts, RedeemError,
};
use crate::http::{ListenerConfig, serve};
use crate::policy::PeerUrl;
use crate::scope::Containment;
use crate::wire::{etag, route};
use crate::{Capsule, Manifest};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

const REPORT: &str = "# Quarterly report\n\nAll green. Written by capsule A.\n";

struct Running {
    capsule: Arc<Capsule>,
    /// Where it answers, as a peer names it.
    url: PeerUrl,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    trace: PathBuf,
}

fn step(text: &str) {
    println!("demo: {text}");
}

/// Runs the demo: the world is built and both listeners bound on this thread; a second thread
/// confines itself to what both capsules need together and runs them (its async runtime's
/// threads start inside the wall); this thread, unconfined, removes the temporary directory at
/// the end.
pub(crate) fn run() -> ExitCode {
    let outcome = tempdir().and_then(|temp| {
        let world = prepare(temp.path())?;
        let ran = std::thread::Builder::new()
            .name("demo".to_owned())
            .spawn(move || confined(world))
            .map_err(|e| e.to_string())?
            .join()
            .unwrap_or_else(|_| Err("the demo thread panicked".to_owned()));
        drop(temp);
        ran
    });
    match outcome {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            super::log::say!("demo failed: {failure}");
            println!("{}", json!({"demo": "failed", "reason": failure}));
            ExitCode::FAILURE
        }
    }
}

/// One capsule, ready to launch: its manifest, workdir handle, trace and bound listener.
struct Prepared {
    name: &'static str,
    manifest: Manifest,
    fs: OsFilesystem,
    sink: JsonlTraceSink,
    trace: PathBuf,
    listener: std::net::TcpListener,
}

/// Both capsules and the directory that holds them.
struct World {
    root: PathBuf,
    a: Prepared,
    b: Prepared,
}

/// Writes the two workdirs, binds both listeners, opens both workdirs and traces: everything
/// that happens before the wall goes up.
#[allow(clippy::disallowed_methods)] // the demo builds its own temporary world
fn prepare(root: &Path) -> Result<World, String> {
    std::fs::create_dir_all(root.join("a/out/notes")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(root.join("b")).map_err(|e| e.to_string())?;
    std::fs::write(root.join("a/out/report.md"), REPORT).map_err(|e| e.to_string())?;
    std::fs::write(root.join("a/out/notes/todo.txt"), "ship it\n").map_err(|e| e.to_string())?;
    std::fs::write(root.join("a/secret.txt"), "not exported\n").map_err(|e| e.to_string())?;
    step(&format!("workdirs under {}", root.display()));
    let bind = || -> Result<(std::net::TcpListener, u16), String> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        Ok((listener, port))
    };
    let (listener_a, port_a) = bind()?;
    let (listener_b, port_b) = bind()?;
    // A reaches B's card to share; B redeems at A: each allow rule names its one port, so the
    // wall lets TCP connect only to these two.
    let yaml_a = format!(
        "name: reporter\nexports:\n  files: {{ root: out/, mode: read-only, max_bytes: 10Mi }}\n  \
         peer_files: {{ root: out/, max_ttl: 15m }}\ncapabilities:\n  network: {{ allow: [\"127.0.0.1:{port_b}\"] }}\n"
    );
    let yaml_b = format!(
        "name: reader\ncapabilities:\n  peer_fetch: {{ allow: [\"127.0.0.1:{port_a}\"] }}\n"
    );
    let capsule = |name: &'static str, yaml: &str, listener| -> Result<Prepared, String> {
        let trace = root.join(format!("trace-{name}.jsonl"));
        Ok(Prepared {
            name,
            manifest: Manifest::from_yaml(yaml)
                .map_err(|e| e.to_string())?
                .manifest,
            fs: OsFilesystem::open(&root.join(name)).map_err(|e| e.to_string())?,
            sink: JsonlTraceSink::open(&trace).map_err(|e| e.to_string())?,
            trace,
            listener,
        })
    };
    Ok(World {
        root: root.to_path_buf(),
        a: capsule("a", &yaml_a, listener_a)?,
        b: capsule("b", &yaml_b, listener_b)?,
    })
}

/// On the demo thread: puts up one wall for both capsules, then starts the async runtime
/// inside it and runs the demo. The wall is the union of the two capsules' (both workdirs,
/// B's `peer-in/`, the two ports) plus reading the demo's directory, where the operator reads
/// both traces back at the end.
fn confined(world: World) -> Result<String, String> {
    super::cores();
    let wall = Confinement::new(&world.a.manifest, world.root.join("a"))
        .also(&world.b.manifest, world.root.join("b"))
        .read(&world.root);
    let report = wall.apply().map_err(|e| format!("confinement: {e}"))?;
    step(&format!(
        "confined: landlock ABI {}, {}",
        report.landlock_abi, report.status
    ));
    let runtime = super::runtime().ok_or("the async runtime could not start")?;
    let outcome = runtime.block_on(demo(world, &report));
    runtime.shutdown_timeout(Duration::from_millis(200));
    outcome
}

async fn start(prepared: Prepared) -> Result<Running, String> {
    let Prepared {
        name,
        manifest,
        fs,
        sink,
        trace,
        listener,
    } = prepared;
    let listener = TcpListener::from_std(listener).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let url = format!("http://127.0.0.1:{port}");
    let capsule = Arc::new(
        Capsule::builder(&manifest)
            .filesystem(Arc::new(fs))
            .clock(Arc::new(SystemClock))
            .trace(Arc::new(sink))
            .advertised_url(url.clone())
            .containment(Containment::Sealed)
            .cores(super::cores())
            .launch()
            .map_err(|e| e.to_string())?,
    );
    let (stop, mut stopped) = watch::channel(false);
    let router = capsule.router();
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        let _ = serve(listener, router, ListenerConfig::default(), shutdown).await;
    });
    step(&format!(
        "capsule {} ({}) listening on {url}",
        name.to_uppercase(),
        capsule.audience()
    ));
    Ok(Running {
        capsule,
        url: PeerUrl::parse(&url).map_err(|e| e.to_string())?,
        stop,
        server,
        trace,
    })
}

/// The bounds of every request the demo makes: generous, on loopback.
const TIMEOUTS: PeerTimeouts = PeerTimeouts {
    connect: Duration::from_secs(5),
    card_total: Duration::from_secs(30),
    fetch_total: Duration::from_secs(30),
};
/// The most body bytes any answer may bring.
const MAX_BODY: u64 = 64 << 20;

/// The operator's `GET` of `target` at `at`.
async fn get(client: &PeerClient, at: &Running, target: &str) -> Result<PeerResponse, String> {
    let limits = Limits {
        connect: TIMEOUTS.connect,
        total: TIMEOUTS.fetch_total,
        max_body: MAX_BODY,
    };
    client
        .get(&at.url.address, target, &[], limits)
        .await
        .map_err(|e| format!("{e:?}"))
}

/// A redeem of `token` at `at` presenting `audience` and no proof: the refusal's status and
/// code, `None` when it was not refused.
///
/// # Errors
/// The peer could not be reached.
async fn refusal_of(
    client: &PeerClient,
    at: &Running,
    token: &str,
    audience: &str,
) -> Result<Option<(u16, Option<String>)>, String> {
    let credentials = Credentials {
        audience: http::HeaderValue::from_str(audience).map_err(|e| e.to_string())?,
        proof: None,
    };
    match client
        .redeem(&at.url, token, credentials, TIMEOUTS, MAX_BODY)
        .await
    {
        Err(RedeemError::Refused { status, code }) => Ok(Some((status, code))),
        Err(unreachable @ RedeemError::Unreachable(_)) => Err(format!("{unreachable:?}")),
        Ok(_) | Err(_) => Ok(None),
    }
}

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        step(&format!("ok: {what}"));
        Ok(())
    } else {
        Err(what.to_owned())
    }
}

/// Runs both capsules through every step, then stops them and summarises the traces.
async fn demo(world: World, confinement: &ConfinementReport) -> Result<String, String> {
    let root = world.root.as_path();
    let a = start(world.a).await?;
    let b = start(world.b).await?;
    let client = PeerClient::new(PeerTls::system().client_config());
    let operated = operate(&client, &a).await?;
    let handle = share(&client, &a, &b).await?;
    let fetched = fetch(root, &a, &b, &handle, &operated.etag).await?;
    let forgery = refuse_replays(&client, &a, &b, &handle.token).await?;
    let lines = finish(a, b).await?;
    Ok(json!({
        "demo": "ok",
        "listed": operated.listed,
        "read_etag": operated.etag,
        "handle_id": handle.id,
        "fetched_path": fetched.path,
        "fetched_sha256": fetched.sha256,
        "forgery": forgery,
        "trace_lines": {"A": lines[0], "B": lines[1]},
        "confinement": confinement.to_json(),
    })
    .to_string())
}

/// What the operator saw of A.
struct Operated {
    /// Files listed.
    listed: usize,
    /// The opaque etag `report.md` was read with.
    etag: String,
}

/// Steps 1 to 3: the operator lists A's export, reads one file, and is refused an escape.
async fn operate(client: &PeerClient, a: &Running) -> Result<Operated, String> {
    let listing = get(client, a, route::LISTING).await?;
    let listing_json: Value = serde_json::from_slice(&listing.body).map_err(|e| e.to_string())?;
    let listed = listing_json["entries"].as_array().map_or(0, Vec::len);
    check(
        listing.status == 200 && listed == 2,
        "operator lists 2 files under out/",
    )?;

    let read = get(client, a, &route::read("report.md")).await?;
    let sent = read
        .headers
        .get(http::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let etag = etag::opaque_of(sent).to_owned();
    let expected_etag = etag::opaque(&crate::hex::sha256_hex(REPORT.as_bytes()));
    check(
        read.status == 200 && etag == expected_etag && read.body == REPORT.as_bytes(),
        "operator reads report.md with a matching etag",
    )?;

    let escape = get(client, a, &route::read("..%2Fsecret.txt")).await?;
    check(
        escape.status == 403,
        "a path escaping the root is refused with 403 outside_root",
    )?;
    Ok(Operated { listed, etag })
}

/// A handle A minted for B.
struct Handle {
    token: String,
    /// Its `handle_id`, which the logs name it by.
    id: String,
}

/// Step 4: A shares `report.md` with B, whose card publishes B's identity key (D-14.1).
async fn share(client: &PeerClient, a: &Running, b: &Running) -> Result<Handle, String> {
    let b_key = b.capsule.identity_key().unwrap_or_default();
    let card = client
        .card(&b.url, TIMEOUTS)
        .await
        .map_err(|e| format!("{e:?}"))?;
    check(
        !b_key.is_empty() && card["capabilities"]["extensions"][0]["params"]["key"] == json!(b_key),
        "B's agent card publishes its Ed25519 identity key",
    )?;
    let port_b = b.url.address.effective_port();
    let shared = a
        .capsule
        .tools()
        .call(
            "share-file",
            json!({"path": "report.md", "peer": format!("127.0.0.1:{port_b}")}),
        )
        .await
        .map_err(|e| format!("share-file: {} {}", e.code, e.message))?;
    let token = shared["handle"].as_str().unwrap_or_default().to_owned();
    let id = shared["handle_id"].as_str().unwrap_or_default().to_owned();
    check(
        shared["audience"] == json!(b.capsule.audience()),
        &format!(
            "A minted handle {id} for {}, bound to B's key",
            b.capsule.audience()
        ),
    )?;
    Ok(Handle { token, id })
}

/// What B fetched.
struct Fetched {
    /// Where it landed, under B's workdir.
    path: String,
    sha256: String,
}

/// Step 5: B fetches the handle, sending a proof signed by its key (D-14.3); the file lands
/// whole, with the etag the operator read.
#[allow(clippy::disallowed_methods)] // the demo inspects its own temporary world
async fn fetch(
    root: &Path,
    a: &Running,
    b: &Running,
    handle: &Handle,
    read_etag: &str,
) -> Result<Fetched, String> {
    let port_a = a.url.address.effective_port();
    let fetched = b
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": format!("127.0.0.1:{port_a}"), "handle": handle.token}),
        )
        .await
        .map_err(|e| format!("fetch-peer-file: {} {}", e.code, e.message))?;
    let path = fetched["path"].as_str().unwrap_or_default().to_owned();
    let sha256 = fetched["sha256"].as_str().unwrap_or_default().to_owned();
    let landed = std::fs::read(root.join("b").join(&path)).map_err(|e| e.to_string())?;
    check(
        path.starts_with("peer-in/")
            && landed == REPORT.as_bytes()
            && etag::opaque(&sha256) == read_etag,
        &format!("B fetched the file into {path}, its redeem proved by its key"),
    )?;
    Ok(Fetched { path, sha256 })
}

/// Step 6: a forged handle is refused, and so are the real one presented by a third capsule
/// and the real one replayed with B's audience but without B's key, all alike. The forgery's
/// code.
async fn refuse_replays(
    client: &PeerClient,
    a: &Running,
    b: &Running,
    token: &str,
) -> Result<String, String> {
    let refused = refusal_of(client, a, &forge(token), b.capsule.audience()).await?;
    let forgery = refused
        .as_ref()
        .and_then(|(_, code)| code.clone())
        .unwrap_or_default();
    check(
        matches!(&refused, Some((403, _))) && forgery == "handle_not_valid",
        "a forged handle is refused with 403 handle_not_valid",
    )?;
    let third = refusal_of(client, a, token, "mallory@127.0.0.1:1").await?;
    check(
        third.is_some() && third == refused,
        "a third capsule's audience gets the same refusal",
    )?;
    let intercepted = refusal_of(client, a, token, b.capsule.audience()).await?;
    check(
        intercepted.is_some() && intercepted == refused,
        "the real handle replayed with B's audience but without B's key gets the same refusal",
    )?;
    Ok(forgery)
}

/// Step 7: shuts both capsules down and summarises their traces; each trace's line count.
async fn finish(a: Running, b: Running) -> Result<[usize; 2], String> {
    for running in [&a, &b] {
        let _ = running.stop.send(true);
    }
    let (a_server, b_server) = (a.server, b.server);
    let _ = tokio::join!(a_server, b_server);
    a.capsule.end_session();
    b.capsule.end_session();
    Ok([summarise("A", &a.trace)?, summarise("B", &b.trace)?])
}

/// Checks one capsule's trace (no token; for A, the mint and the redeem proved by key) and
/// says what it holds; its line count.
#[allow(clippy::disallowed_methods)] // the demo reads its own temporary world
fn summarise(label: &str, trace: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(trace).map_err(|e| e.to_string())?;
    check(
        !crate::redact::holds_token(&text),
        &format!("trace {label} holds no token"),
    )?;
    if label == "A" {
        let proved = |event_type: &str| {
            text.lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .any(|e| {
                    e["event_type"] == event_type
                        && e["outcome"] == "ok"
                        && e["audience_proof"] == "ed25519"
                })
        };
        check(
            proved("peer_handle_mint") && proved("peer_handle_redeem"),
            "trace A records the mint and the redeem with audience_proof ed25519",
        )?;
    }
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for line in text.lines() {
        let event: Value = serde_json::from_str(line).map_err(|e| format!("trace {label}: {e}"))?;
        *kinds
            .entry(format!(
                "{}:{}",
                event["event_type"].as_str().unwrap_or("?"),
                event["outcome"].as_str().unwrap_or("?")
            ))
            .or_default() += 1;
    }
    step(&format!(
        "trace {label}: {} lines {kinds:?}",
        text.lines().count()
    ));
    Ok(text.lines().count())
}

/// Flips one character of the MAC segment.
fn forge(token: &str) -> String {
    let mut bytes = token.as_bytes().to_vec();
    if let Some(last) = bytes.last_mut() {
        *last = if *last == b'A' { b'E' } else { b'A' };
    }
    String::from_utf8(bytes).unwrap_or_default()
}

/// A fresh temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    #[allow(clippy::disallowed_methods)]
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[allow(clippy::disallowed_methods)]
fn tempdir() -> Result<TempDir, String> {
    let nonce = super::random_hex::<8>();
    let path = std::env::temp_dir().join(format!("resource-plane-demo-{nonce}"));
    std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
    Ok(TempDir(path))
}
