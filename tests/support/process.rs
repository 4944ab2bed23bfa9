#![allow(clippy::disallowed_methods)] // a test harness builds its world with std::fs
#![allow(dead_code)] // each test file uses a subset

//! One `resource-plane serve` process started through `bash` (so a test can give it a resource
//! limit or a redirection: `2>/dev/full`, `prlimit`, a closed stderr), with its stdout read on a
//! thread, plus raw HTTP/1.1 over loopback.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The binary under test: this build's, or the one `RP_BIN` names (to show that a test fails
/// on an older build).
pub fn bin() -> String {
    std::env::var("RP_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_resource-plane").to_owned())
}

/// How long a launch may take to print its ready line.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(20);

/// A workdir with a manifest, and a trace path outside it.
pub struct Workdir {
    pub dir: tempfile::TempDir,
    pub outside: tempfile::TempDir,
}

impl Workdir {
    /// A workdir whose manifest is `manifest`.
    pub fn new(manifest: &str) -> Self {
        let dir = tempfile::tempdir().expect("workdir");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::write(outside.path().join("manifest.yaml"), manifest).expect("manifest");
        Workdir { dir, outside }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `content` at `relative` under the workdir, making its directories.
    pub fn file(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write");
        path
    }

    pub fn trace(&self) -> PathBuf {
        self.outside.path().join("trace.jsonl")
    }

    /// The trace's lines, parsed.
    pub fn trace_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(self.trace())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON trace line"))
            .collect()
    }

    /// `serve` arguments for this workdir, then `extra`.
    pub fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--workdir".into(),
            self.dir.path().display().to_string(),
            "--manifest".into(),
            self.outside
                .path()
                .join("manifest.yaml")
                .display()
                .to_string(),
            "--trace".into(),
            self.trace().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }
}

/// Where a started process's stderr goes.
#[derive(Debug, Clone, Copy)]
pub enum Stderr {
    /// The test's own stderr.
    Inherit,
    /// A shell redirection appended to the command line (`2>/dev/full`).
    Redirect(&'static str),
    /// A pipe whose reading end is closed at once: every write fails with `EPIPE`.
    ClosedPipe,
}

/// A running `serve`, killed on drop.
pub struct Served {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    pub ready: Value,
}

impl Served {
    /// Starts `bash -c "<setup> exec BIN ARGS"` with `stderr`; `console` keeps stdin open.
    pub fn start(setup: &str, args: &[String], stderr: Stderr, console: bool) -> Served {
        let redirections = match stderr {
            Stderr::Redirect(redirection) => redirection,
            Stderr::Inherit | Stderr::ClosedPipe => "",
        };
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        let script = format!(
            "{setup}\nexec '{}' {} {redirections}",
            bin(),
            quoted.join(" ")
        );
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .stdin(if console {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(match stderr {
                Stderr::ClosedPipe => Stdio::piped(),
                Stderr::Inherit | Stderr::Redirect(_) => Stdio::inherit(),
            })
            .spawn()
            .expect("spawn bash");
        drop(child.stderr.take());
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines
            .recv_timeout(LAUNCH_TIMEOUT)
            .unwrap_or_else(|_| panic!("no ready line from {script}"));
        let ready: Value = serde_json::from_str(&first).expect("a JSON ready line");
        assert_eq!(ready["event"], "listening", "{first}");
        Served {
            child,
            stdin,
            lines,
            ready,
        }
    }

    pub fn port(&self) -> u16 {
        let url = self.ready["url"].as_str().expect("url");
        url.rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port")
    }

    /// The next stdout line within `timeout`.
    pub fn line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Writes one console line.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("console stdin");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .expect("write a console line");
    }

    /// Writes raw bytes to the console.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("console stdin");
        stdin
            .write_all(bytes)
            .and_then(|()| stdin.flush())
            .expect("write console bytes");
    }

    /// Closes stdin (end of input for the console).
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// The exit status, if the process ends within `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn terminate(&self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 GET; the status and the whole response as text (lossy).
pub fn get(port: u16, path: &str) -> (u16, String) {
    let request = super::http::request_bytes("GET", path, &[("host", "x")]);
    let bytes = super::http::exchange_raw(("127.0.0.1", port), &request, Duration::from_secs(20));
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}
