//! The Landlock wall seen from inside: a process puts up `resource_plane::confine` for a
//! capsule (or, with `none`, does not), then tries each thing the wall forbids and each thing
//! it must still allow, and prints one JSON line of what the kernel answered.
//!
//! `cargo run --example confine_probe` builds a small world in a temporary directory, runs
//! itself twice on it (confined and not), prints both answers and exits 0 only when the
//! confined run was refused exactly what the wall forbids and the unconfined run was refused
//! nothing. `confine_probe confine|none DIR` is one such run (the crate's
//! `tests/confinement.rs` drives it that way): `DIR/work` is the workdir (holding
//! `inside.txt`), `DIR/outside.txt` lies beside it.
#![allow(clippy::disallowed_methods)] // a composition root: it probes the world on purpose

use resource_plane::Manifest;
use resource_plane::backends::{Filesystem, OsFilesystem};
use resource_plane::confine::{Confinement, ConfinementReport};
use resource_plane::scope::{Containment, RootPath};
use serde_json::{Map, Value, json};
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => drive(),
        [mode, dir] if mode == "confine" || mode == "none" => {
            let answer = probe(mode == "confine", Path::new(dir));
            println!("{answer}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: confine_probe [confine|none DIR]");
            ExitCode::from(2)
        }
    }
}

/// What the kernel answered: `ok`, or the refusal's errno name.
fn outcome<T>(result: std::io::Result<T>) -> Value {
    match result {
        Ok(_) => json!("ok"),
        Err(e) => match e.raw_os_error() {
            Some(13) => json!("EACCES"),
            Some(1) => json!("EPERM"),
            _ => json!(format!("error: {e}")),
        },
    }
}

/// One run: everything reaching outside is set up first (two listening ports, an abstract
/// socket, the workdir handle), then the wall goes up, then each attempt.
fn probe(confine: bool, dir: &Path) -> Value {
    let work = dir.join("work");
    let allowed = TcpListener::bind("127.0.0.1:0").expect("bind the allowed port");
    let unlisted = TcpListener::bind("127.0.0.1:0").expect("bind the unlisted port");
    let allowed_port = allowed.local_addr().expect("address").port();
    let abstract_name = format!("resource-plane-probe-{}", std::process::id());
    let abstract_addr =
        SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("abstract name");
    let _abstract_listener = UnixListener::bind_addr(&abstract_addr).expect("abstract socket");
    let manifest = Manifest::from_yaml(&format!(
        "name: probe\nexports:\n  files: {{ root: ., mode: read-only }}\n\
         capabilities:\n  peer_fetch: {{ allow: [\"127.0.0.1:{allowed_port}\"] }}\n"
    ))
    .expect("manifest")
    .manifest;
    let fs = OsFilesystem::open(&work).expect("open the workdir");
    let root = fs
        .open_root(&RootPath::parse(".").expect("root"), Containment::Advisory)
        .expect("open the export root");
    let inside = root
        .walk()
        .expect("walk the export")
        .into_iter()
        .find(|path| path.as_str() == "inside.txt")
        .expect("inside.txt is exported");

    let report = if confine {
        Confinement::new(&manifest, &work)
            .apply()
            .expect("put the wall up")
    } else {
        ConfinementReport::unconfined(resource_plane::confine::landlock_abi())
    };

    let mut results = Map::new();
    let mut record = |name: &str, value: Value| {
        results.insert(name.to_owned(), value);
    };
    record(
        "read_inside",
        outcome(std::fs::read(work.join("inside.txt"))),
    );
    record(
        "read_through_plane",
        outcome(
            root.open_file(&inside)
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|mut file| {
                    let mut text = String::new();
                    file.read_to_string(&mut text).map(|_| text)
                }),
        ),
    );
    record(
        "read_outside",
        outcome(std::fs::read(dir.join("outside.txt"))),
    );
    record("list_outside", outcome(std::fs::read_dir(dir)));
    record(
        "write_landing",
        // As a landing does: the directory made if missing, then the file.
        outcome(
            std::fs::create_dir_all(work.join("peer-in"))
                .and_then(|()| std::fs::write(work.join("peer-in/landed.txt"), "landed\n")),
        ),
    );
    record(
        "write_beside",
        outcome(std::fs::write(work.join("beside.txt"), "beside\n")),
    );
    record(
        "connect_allowed",
        outcome(TcpStream::connect(("127.0.0.1", allowed_port))),
    );
    let unlisted_port = unlisted.local_addr().expect("address").port();
    record(
        "connect_unlisted",
        outcome(TcpStream::connect(("127.0.0.1", unlisted_port))),
    );
    record("bind_listener", outcome(TcpListener::bind("127.0.0.1:0")));
    record(
        "abstract_unix",
        outcome(UnixStream::connect_addr(&abstract_addr)),
    );
    let parent = rustix::process::getppid().expect("a parent");
    record(
        "signal_parent",
        outcome(rustix::process::test_kill_process(parent).map_err(std::io::Error::from)),
    );
    record(
        "certificates",
        json!(rustls_native_certs::load_native_certs().certs.len()),
    );
    json!({"confinement": report.to_json(), "results": results})
}

/// Builds a world, runs both probes, and compares them.
fn drive() -> ExitCode {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::create_dir(dir.path().join("work")).expect("workdir");
    std::fs::write(dir.path().join("work/inside.txt"), "inside\n").expect("inside");
    std::fs::write(dir.path().join("outside.txt"), "outside\n").expect("outside");
    let run = |mode: &str| -> Value {
        let output = std::process::Command::new(std::env::current_exe().expect("this program"))
            .arg(mode)
            .arg(dir.path())
            .output()
            .expect("run the probe");
        let text = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(text.trim()).expect("one JSON line")
    };
    // Confined first: the wall itself makes `peer-in/`, which the unconfined run then reuses.
    let confined = run("confine");
    let unconfined = run("none");
    println!("unconfined: {unconfined}");
    println!("confined:   {confined}");
    if confined["confinement"]["status"] == "none" {
        println!("this kernel offers no Landlock: nothing to compare");
        return ExitCode::SUCCESS;
    }
    let forbidden = [
        "read_outside",
        "list_outside",
        "write_beside",
        "connect_unlisted",
        "bind_listener",
        "abstract_unix",
        "signal_parent",
    ];
    let abi = confined["confinement"]["landlock_abi"]
        .as_u64()
        .unwrap_or(0);
    let mut held = true;
    for (name, value) in unconfined["results"].as_object().into_iter().flatten() {
        let confined_value = &confined["results"][name];
        let refused = confined_value == "EACCES" || confined_value == "EPERM";
        let needs = match name.as_str() {
            "connect_unlisted" | "bind_listener" => 4,
            "abstract_unix" | "signal_parent" => 6,
            _ => 1,
        };
        let expected_refusal = forbidden.contains(&name.as_str()) && abi >= needs;
        let ok = if name == "certificates" {
            confined_value == value
        } else {
            value == "ok" && refused == expected_refusal
        };
        println!(
            "{} {name}: unconfined {value}, confined {confined_value}",
            if ok { "ok  " } else { "FAIL" }
        );
        held &= ok;
    }
    if held {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
