//! The router as a tower service, under a base path, nested in axum, in front of a runtime's own
//! routes; and the listener's hardening (`serve_with`) in front of services that are not the
//! router.
//!
//! Socket-free where the router alone is judged (`Service::call`, `ServiceExt::oneshot`); on
//! loopback where the hardening is (HTTP/2 preface, oversized and slow heads, the connection
//! cap, the drain, a raw `#` in the request target).
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets

mod support;

use axum::routing::get;
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Either, Full};
use resource_plane::http::{ListenerConfig, PlaneBody, serve, serve_with};
use serde_json::Value;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use support::http::{exchange_raw_async, parse_reply, read_to_eof_async};
use support::world::World;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;
use tower_service::Service;

const REPORT: &[u8] = b"# Report\nall systems nominal\n";
const HASH_NAMED: &[u8] = b"a file whose name holds a #\n";
const MTIME: i64 = 1_787_577_327_015;
/// How long a loopback exchange may take before the test fails.
const IO_DEADLINE: Duration = Duration::from_secs(10);

// ------------------------------------------------------------------------------------------------
// The router as a Service
// ------------------------------------------------------------------------------------------------

fn assert_service<S, B>(_: &S)
where
    S: Service<Request<B>, Response = Response<PlaneBody>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
}

#[tokio::test]
async fn the_router_is_a_service_over_any_body_type() {
    let w = world("a");
    let router = w.capsule.router();
    assert_service::<_, ()>(&router);
    assert_service::<_, String>(&router);
    assert_service::<_, std::rc::Rc<u8>>(&router);

    let path = "/resources/files/report.md";
    let want = report("a");
    let bodies: Vec<Response<PlaneBody>> = vec![
        router.clone().oneshot(get_request(path, ())).await.unwrap(),
        router
            .clone()
            .oneshot(get_request(path, String::from("never read")))
            .await
            .unwrap(),
        router
            .clone()
            .oneshot(get_request(path, Full::new(Bytes::from_static(b"x"))))
            .await
            .unwrap(),
        router
            .clone()
            .oneshot(get_request(path, axum::body::Body::from("x")))
            .await
            .unwrap(),
    ];
    for response in &bodies {
        assert_eq!(response.status(), 200);
        assert_eq!(response.body().bytes().as_ref(), want.as_slice());
    }

    // A body that is not even Send: `call` drops it, and its future can still be spawned.
    let mut service = router.clone();
    std::future::poll_fn(|cx| Service::<Request<std::rc::Rc<u8>>>::poll_ready(&mut service, cx))
        .await
        .unwrap();
    let future = service.call(get_request(path, std::rc::Rc::new(7u8)));
    let response = tokio::spawn(future).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);

    // Each request left its one trace line (D-6.3) and counts once.
    assert_eq!(traced(&w).len(), 5);
    assert_eq!(router.stats().requests_answered, 5);

    // `handle` answers as `call` does.
    let handled = router.handle(get_request("/resources/files", ())).await;
    assert_eq!(handled.status(), 200);
    assert_eq!(
        traced(&w).last().unwrap(),
        &("resource_list".to_owned(), Value::from("out/"))
    );
}

// ------------------------------------------------------------------------------------------------
// Base path
// ------------------------------------------------------------------------------------------------

/// What a request under a base path must get: status, and the trace line (event type and
/// recorded path) it leaves, if any.
struct Case {
    path: &'static str,
    status: u16,
    traced: Option<(&'static str, &'static str)>,
    body: Option<&'static [u8]>,
}

fn case(path: &'static str, status: u16, traced: Option<(&'static str, &'static str)>) -> Case {
    Case {
        path,
        status,
        traced,
        body: None,
    }
}

fn base_path_cases() -> Vec<Case> {
    let read = |p| Some(("resource_read", p));
    vec![
        Case {
            body: Some(b"x"),
            ..case(
                "/capsules/a/resources/files/sub/x.md",
                200,
                read("sub/x.md"),
            )
        },
        Case {
            body: Some(b"x"),
            ..case(
                "/capsules/a/resources/files/sub%2Fx.md",
                200,
                read("sub/x.md"),
            )
        },
        case(
            "/capsules/a/resources/files",
            200,
            Some(("resource_list", "out/")),
        ),
        case(
            "/capsules/a/resources/files?x=1",
            200,
            Some(("resource_list", "out/")),
        ),
        case(
            "/capsules/a/resources/files/../secret.txt",
            403,
            read("../secret.txt"),
        ),
        case(
            "/capsules/a/resources/nowhere",
            404,
            read("/resources/nowhere"),
        ),
        case("/capsules/a/resources", 404, read("/resources")),
        case("/capsules/a/.well-known/agent-card.json", 200, None),
        // The prefix itself, with and without its slash: no route of the router's.
        case("/capsules/a", 404, None),
        case("/capsules/a/", 404, None),
        case("/capsules/a?x=1", 404, None),
        // Lookalikes: matched on raw bytes, a segment at a time, nothing decoded.
        case("/capsules/ab/resources/files", 404, None),
        case("/capsules/a%2Fresources/files", 404, None),
        case("/capsules%2Fa/resources/files", 404, None),
        case("/capsules/%61/resources/files", 404, None),
        case("/Capsules/a/resources/files", 404, None),
        case("/capsules/a//resources/files", 404, None),
        case("/capsules/a/capsules/a/resources/files", 404, None),
        // The planes' own paths are not answered outside the base path.
        case("/resources/files", 404, None),
        case("/resources/files/sub/x.md", 404, None),
        case("/.well-known/agent-card.json", 404, None),
        case("/", 404, None),
    ]
}

#[tokio::test]
async fn a_base_path_is_cut_on_raw_bytes_before_routing() {
    for base in ["/capsules/a", "/capsules/a/"] {
        let w = world("a");
        let router = w.capsule.router().with_base_path(base).expect("a base");
        assert_eq!(router.base_path(), Some("/capsules/a"));
        for case in base_path_cases() {
            let before = traced(&w).len();
            let response = router.clone().oneshot(get_request(case.path, ())).await;
            let response = response.unwrap();
            assert_eq!(response.status(), case.status, "{base} {}", case.path);
            if case.status == 404 && case.traced.is_none() {
                assert_eq!(error_code(&response.body().bytes()), "not_found");
            }
            if let Some(body) = case.body {
                assert_eq!(response.body().bytes().as_ref(), body, "{}", case.path);
            }
            let traced = traced(&w);
            match case.traced {
                None => assert_eq!(traced.len(), before, "{} left a trace line", case.path),
                Some((kind, path)) => {
                    assert_eq!(traced.len(), before + 1, "{}", case.path);
                    assert_eq!(
                        traced.last().unwrap(),
                        &(kind.to_owned(), Value::from(path)),
                        "{}",
                        case.path
                    );
                }
            }
            let claimed =
                case.traced.is_some() || case.path == "/capsules/a/.well-known/agent-card.json";
            assert_eq!(router.answers(case.path), claimed, "{}", case.path);
            // The blocking form cuts the base path too.
            let blocking = router.respond(&Method::GET, case.path, &[]);
            assert_eq!(blocking.status(), case.status, "respond {}", case.path);
        }
    }
}

#[tokio::test]
async fn a_router_without_a_base_path_answers_at_the_root() {
    let w = world("a");
    let router = w.capsule.router();
    assert_eq!(router.base_path(), None);
    assert!(router.answers("/resources/files"));
    assert!(!router.answers("/capsules/a/resources/files"));
    let response = router
        .oneshot(get_request("/capsules/a/resources/files", ()))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert!(traced(&w).is_empty());
}

#[test]
fn base_paths_that_cannot_be_matched_on_raw_bytes_are_refused() {
    let w = world("a");
    let router = w.capsule.router();
    for bad in [
        "",
        "/",
        "//",
        "capsules/a",
        "/capsules//a",
        "/capsules/a//",
        "/capsules/./a",
        "/capsules/../a",
        "/capsules/a/..",
        "/capsules/a%2Fb",
        "/capsules/%61",
        "/a?b",
        "/a#b",
        "/a b",
        "/a\\b",
        "/caf\u{e9}",
        "/a\0",
    ] {
        let refused = router.with_base_path(bad).expect_err(bad);
        assert_eq!(refused.base, bad);
        assert!(
            refused.to_string().contains("invalid base path"),
            "{refused}"
        );
    }
    for good in [
        "/a",
        "/capsules/a",
        "/capsules/a/",
        "/v1/capsules/reporter-01",
        "/x/~user/a.b_c;d=e:f@g!h$i&j'k(l)m*n+o,p",
    ] {
        let router = router.with_base_path(good).expect(good);
        assert_eq!(router.base_path(), Some(good.trim_end_matches('/')));
    }
    // A new base replaces the old one.
    let nested = router
        .with_base_path("/a")
        .unwrap()
        .with_base_path("/b")
        .unwrap();
    assert!(nested.answers("/b/resources/files"));
    assert!(!nested.answers("/a/resources/files"));
    assert!(!nested.answers("/a/b/resources/files"));
}

// ------------------------------------------------------------------------------------------------
// Nested in axum
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn axum_nest_service_hands_the_router_the_path_below_the_prefix() {
    let (a, b) = (world("a"), world("b"));
    let app = axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .nest_service("/capsules/a", a.capsule.router())
        .nest_service("/capsules/b", b.capsule.router());

    let call = |path: &'static str| {
        let app = app.clone();
        async move {
            let response = app.oneshot(get_request(path, axum::body::Body::empty()));
            let response = response.await.unwrap();
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, body.to_vec())
        }
    };

    assert_eq!(
        call("/capsules/a/resources/files/report.md").await,
        (200, report("a"))
    );
    assert_eq!(
        call("/capsules/b/resources/files/report.md").await,
        (200, report("b"))
    );
    assert_eq!(call("/capsules/b/resources/files/sub%2Fx.md").await.0, 200);
    let (status, listing) = call("/capsules/b/resources/files").await;
    assert_eq!(status, 200);
    let listing: Value = serde_json::from_slice(&listing).unwrap();
    assert_eq!(listing["entries"].as_array().unwrap().len(), 3);
    assert_eq!(call("/capsules/a/resources/nowhere").await.0, 404);
    assert_eq!(call("/healthz").await, (200, b"ok".to_vec()));
    // The agent card, per capsule.
    let (status, card) = call("/capsules/a/.well-known/agent-card.json").await;
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_slice::<Value>(&card).unwrap()["name"], "a");

    // Each capsule traced its own requests, relative to its plane.
    assert_eq!(
        traced(&a),
        vec![
            ("resource_read".to_owned(), Value::from("report.md")),
            (
                "resource_read".to_owned(),
                Value::from("/resources/nowhere")
            ),
        ]
    );
    assert_eq!(
        traced(&b),
        vec![
            ("resource_read".to_owned(), Value::from("report.md")),
            ("resource_read".to_owned(), Value::from("sub/x.md")),
            ("resource_list".to_owned(), Value::from("out/")),
        ]
    );

    // Lookalikes and the prefix itself reach no plane: nothing traced.
    for path in [
        "/capsules/a%2Fresources/files",
        "/capsules/ab/resources/files",
        "/capsules/A/resources/files",
        "/resources/files",
        "/capsules/a",
        "/capsules/a/",
    ] {
        assert_eq!(call(path).await.0, 404, "{path}");
    }
    assert_eq!(traced(&a).len(), 2);
    assert_eq!(traced(&b).len(), 3);

    // What is under the prefix is axum's call: it takes the empty segment after it as the
    // boundary and hands the router `/resources/files`, where `with_base_path` answers 404.
    assert_eq!(call("/capsules/a//resources/files").await.0, 200);
    assert_eq!(
        traced(&a).last().unwrap(),
        &("resource_list".to_owned(), Value::from("out/"))
    );
    let own = a.capsule.router().with_base_path("/capsules/a").unwrap();
    assert!(!own.answers("/capsules/a//resources/files"));
}

// ------------------------------------------------------------------------------------------------
// The fallback combinator
// ------------------------------------------------------------------------------------------------

/// The runtime's own routes: answers `runtime <method> <uri> <body>` and remembers each path.
fn runtime_routes(
    seen: Arc<Mutex<Vec<String>>>,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |request: Request<Full<Bytes>>| {
        let seen = seen.clone();
        async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            seen.lock().unwrap().push(parts.uri.to_string());
            let text = format!(
                "runtime {} {} {}",
                parts.method,
                parts.uri,
                String::from_utf8_lossy(&body)
            );
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text))))
        }
    })
}

async fn text_of<L, R>(body: Either<L, R>) -> (bool, Vec<u8>)
where
    Either<L, R>: http_body::Body<Data = Bytes>,
    <Either<L, R> as http_body::Body>::Error: std::fmt::Debug,
{
    let planes = matches!(body, Either::Left(_));
    (planes, body.collect().await.unwrap().to_bytes().to_vec())
}

#[tokio::test]
async fn the_fallback_gets_every_path_the_planes_do_not_claim() {
    let w = world("a");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = w
        .capsule
        .router()
        .with_fallback(runtime_routes(seen.clone()));

    let send = |method: Method, path: &'static str, body: &'static str| {
        let app = app.clone();
        async move {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .body(Full::new(Bytes::from_static(body.as_bytes())))
                .unwrap();
            let response = app.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let (planes, body) = text_of(response.into_body()).await;
            (status, planes, body)
        }
    };

    // Claimed: the planes answer, every method, and trace.
    let (status, planes, body) = send(Method::GET, "/resources/files/report.md", "").await;
    assert_eq!((status, planes, body), (200, true, report("a")));
    let (status, planes, body) = send(Method::POST, "/resources/files", "hello").await;
    assert_eq!((status, planes), (405, true));
    assert_eq!(error_code(&body), "method_not_allowed");
    let (status, planes, _) = send(Method::GET, "/resources/elsewhere", "").await;
    assert_eq!((status, planes), (404, true));
    let (status, planes, _) = send(Method::GET, "/.well-known/agent-card.json", "").await;
    assert_eq!((status, planes), (200, true));
    assert_eq!(traced(&w).len(), 3);

    // Not claimed: the runtime's service, with the request as sent, body included.
    for (method, path, body, want) in [
        (Method::GET, "/healthz", "", "runtime GET /healthz "),
        (
            Method::POST,
            "/api/tasks?x=1",
            "{\"go\":1}",
            "runtime POST /api/tasks?x=1 {\"go\":1}",
        ),
        (Method::GET, "/resourcesx", "", "runtime GET /resourcesx "),
        (
            Method::GET,
            "/resources%2Ffiles",
            "",
            "runtime GET /resources%2Ffiles ",
        ),
        (Method::GET, "/", "", "runtime GET / "),
    ] {
        let (status, planes, text) = send(method, path, body).await;
        assert_eq!((status, planes), (200, false), "{path}");
        assert_eq!(String::from_utf8(text).unwrap(), want);
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "/healthz",
            "/api/tasks?x=1",
            "/resourcesx",
            "/resources%2Ffiles",
            "/"
        ]
    );
    assert_eq!(
        traced(&w).len(),
        3,
        "the fallback's requests are not traced"
    );

    // Under a base path, the planes' own paths outside it are the runtime's.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = w
        .capsule
        .router()
        .with_base_path("/capsules/a")
        .unwrap()
        .with_fallback(runtime_routes(seen.clone()));
    let under = app
        .clone()
        .oneshot(get_request("/capsules/a/resources/files", Full::default()))
        .await
        .unwrap();
    assert!(matches!(under.body(), Either::Left(_)));
    assert_eq!(under.status(), 200);
    let outside = app
        .oneshot(get_request("/resources/files", Full::default()))
        .await
        .unwrap();
    assert!(matches!(outside.body(), Either::Right(_)));
    assert_eq!(*seen.lock().unwrap(), ["/resources/files"]);
    assert_eq!(traced(&w).len(), 4);
}

/// A runtime service that is never ready, or fails when called.
#[derive(Clone)]
struct Broken {
    ready: bool,
    calls: Arc<AtomicUsize>,
}

impl Service<Request<()>> for Broken {
    type Response = Response<Full<Bytes>>;
    type Error = &'static str;
    type Future = std::future::Ready<Result<Response<Full<Bytes>>, &'static str>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), &'static str>> {
        Poll::Ready(if self.ready { Ok(()) } else { Err("not ready") })
    }

    fn call(&mut self, _request: Request<()>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err("failed"))
    }
}

#[tokio::test]
async fn the_fallback_is_made_ready_and_its_errors_are_its_own() {
    let w = world("a");
    for (ready, error, calls) in [(false, "not ready", 0), (true, "failed", 1)] {
        let counted = Arc::new(AtomicUsize::new(0));
        let app = w.capsule.router().with_fallback(Broken {
            ready,
            calls: counted.clone(),
        });
        // The planes never wait on the fallback.
        let planes = app
            .clone()
            .oneshot(get_request("/resources/files/report.md", ()))
            .await
            .expect("the planes answer");
        assert_eq!(planes.status(), 200);
        let refused = app.oneshot(get_request("/healthz", ())).await;
        assert_eq!(refused.err(), Some(error));
        assert_eq!(counted.load(Ordering::SeqCst), calls);
    }
}

// ------------------------------------------------------------------------------------------------
// The hardening in front of any service
// ------------------------------------------------------------------------------------------------

/// A server run in-process; dropping it does not stop it, `stop` does.
struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn stop(mut self) -> std::io::Result<()> {
        let _ = self.stop.take().expect("running").send(());
        tokio::time::timeout(IO_DEADLINE, self.served)
            .await
            .expect("serve returns after its drain")
            .expect("the serve task")
    }
}

async fn start_with<S, ResBody>(service: S, config: ListenerConfig) -> Running
where
    S: Service<Request<hyper::body::Incoming>, Response = Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResBody: http_body::Body + Send + 'static,
    ResBody::Data: Send,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(serve_with(listener, service, config, async move {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop: Some(stop),
        served,
    }
}

/// Sends `request` on a fresh connection and reads to EOF (a reset after an answer ends the
/// read too: the server may close with an oversized head unread).
async fn exchange(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    exchange_raw_async(addr, request, IO_DEADLINE).await
}

/// A runtime's own service, not the router: answers `hello <path>`, counting its calls.
fn counting_service(
    calls: Arc<AtomicUsize>,
) -> impl Service<
    Request<hyper::body::Incoming>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send + 'static,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |request: Request<hyper::body::Incoming>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let text = format!("hello {}", request.uri());
        async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text)))) }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_is_not_the_router_gets_the_whole_hardening() {
    let calls = Arc::new(AtomicUsize::new(0));
    let server = start_with(counting_service(calls.clone()), ListenerConfig::default()).await;
    let addr = server.addr;

    let reply = parse_reply(&exchange(addr, b"GET /x?y=1 HTTP/1.1\r\nHost: x\r\n\r\n").await);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, b"hello /x?y=1");
    assert_eq!(reply.header("connection"), Some("close"));
    let reply = parse_reply(&exchange(addr, b"GET /old HTTP/1.0\r\n\r\n").await);
    assert_eq!(
        (reply.status, reply.body.as_slice()),
        (200, &b"hello /old"[..])
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // Refused before the service sees anything: other versions (the HTTP/2 preface among
    // them) 505, a head over 16 KiB 431 (D-4.5, D-4.6).
    let oversized = format!(
        "GET /x HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(17 * 1024)
    );
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(20_000));
    for (request, status) in [
        (&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..], 505),
        (b"GET /x HTTP/1.2\r\nHost: x\r\n\r\n", 505),
        (b"GET /x HTTP/3\r\n\r\n", 505),
        (oversized.as_bytes(), 431),
        (long_target.as_bytes(), 431),
        (b"GET /a\x7fb HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ] {
        let reply = parse_reply(&exchange(addr, request).await);
        assert_eq!(
            reply.status,
            status,
            "{:?}",
            String::from_utf8_lossy(&request[..request.len().min(40)])
        );
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the service saw none of them"
    );

    // A raw `#` reaches the service as a name byte, escaped (RFC 9112 §3.2: no fragment).
    let reply = parse_reply(&exchange(addr, b"GET /a#frag?q#x HTTP/1.1\r\n\r\n").await);
    assert_eq!(reply.body, b"hello /a%23frag?q%23x");

    server.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_service_closes_its_connection_without_an_answer_and_serving_goes_on() {
    let failing = tower::service_fn(|request: Request<hyper::body::Incoming>| async move {
        if request.uri().path() == "/fail" {
            return Err(std::io::Error::other("the runtime's route failed"));
        }
        Ok(Response::new(Full::new(Bytes::from_static(b"fine"))))
    });
    let server = start_with(failing, ListenerConfig::default()).await;
    let failed = exchange(server.addr, b"GET /fail HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(String::from_utf8_lossy(&failed), "");
    let fine = parse_reply(&exchange(server.addr, b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n").await);
    assert_eq!((fine.status, fine.body.as_slice()), (200, &b"fine"[..]));
    server.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_not_complete_within_the_header_timeout_is_dropped() {
    let calls = Arc::new(AtomicUsize::new(0));
    let config = ListenerConfig {
        header_read_timeout: Duration::from_millis(400),
        ..ListenerConfig::default()
    };
    let server = start_with(counting_service(calls.clone()), config).await;
    for partial in [
        &b""[..],
        b"GET /slow HT",
        b"GET /slow HTTP/1.1\r\nHost: x\r\n",
    ] {
        let started = Instant::now();
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(partial).await.unwrap();
        let answer = read_to_eof_async(&mut stream, IO_DEADLINE).await;
        let waited = started.elapsed();
        // hyper may write a 408 for a head it started; never anything the service made.
        assert!(
            answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
            "{:?}",
            String::from_utf8_lossy(&answer)
        );
        assert!(
            waited >= Duration::from_millis(350) && waited < Duration::from_secs(5),
            "{partial:?} dropped after {waited:?}"
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    server.stop().await.unwrap();
}

/// A service that holds each request until a permit is given, telling when one arrives.
fn held_service(
    entered: tokio::sync::mpsc::UnboundedSender<String>,
    permits: Arc<tokio::sync::Semaphore>,
) -> impl Service<
    Request<hyper::body::Incoming>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send + 'static,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |request: Request<hyper::body::Incoming>| {
        let (entered, permits) = (entered.clone(), permits.clone());
        async move {
            let path = request.uri().path().to_owned();
            entered.send(path.clone()).unwrap();
            permits.acquire().await.unwrap().forget();
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!(
                "done {path}"
            )))))
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_and_are_then_served() {
    let (entered, mut arrivals) = tokio::sync::mpsc::unbounded_channel();
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let config = ListenerConfig {
        max_connections: 1,
        ..ListenerConfig::default()
    };
    let server = start_with(held_service(entered, permits.clone()), config).await;
    let addr = server.addr;
    let first = tokio::spawn(async move { exchange(addr, b"GET /first HTTP/1.1\r\n\r\n").await });
    assert_eq!(arrivals.recv().await.unwrap(), "/first");
    let second = tokio::spawn(async move { exchange(addr, b"GET /second HTTP/1.1\r\n\r\n").await });
    // The second connection waits in the backlog while the first holds the only slot.
    let early = tokio::time::timeout(Duration::from_millis(500), arrivals.recv()).await;
    assert!(
        early.is_err(),
        "the cap let a second connection in: {early:?}"
    );
    permits.add_permits(1);
    let first = parse_reply(&first.await.unwrap());
    assert_eq!(first.body, b"done /first");
    assert_eq!(arrivals.recv().await.unwrap(), "/second");
    permits.add_permits(1);
    let second = parse_reply(&second.await.unwrap());
    assert_eq!(second.body, b"done /second");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_requests_in_flight_then_stops_accepting() {
    let (entered, mut arrivals) = tokio::sync::mpsc::unbounded_channel();
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let server = start_with(
        held_service(entered, permits.clone()),
        ListenerConfig::default(),
    )
    .await;
    let addr = server.addr;
    let in_flight =
        tokio::spawn(async move { exchange(addr, b"GET /busy HTTP/1.1\r\n\r\n").await });
    assert_eq!(arrivals.recv().await.unwrap(), "/busy");
    let stopping = tokio::spawn(server.stop());
    // Once shutdown began, the listening socket is closed: no new connection.
    let refused = async {
        loop {
            if TcpStream::connect(addr).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(IO_DEADLINE, refused)
        .await
        .expect("the listener closes on shutdown");
    assert!(
        !stopping.is_finished(),
        "serve waits for the request in flight"
    );
    permits.add_permits(1);
    let reply = parse_reply(&in_flight.await.unwrap());
    assert_eq!(
        (reply.status, reply.body.as_slice()),
        (200, &b"done /busy"[..])
    );
    stopping.await.unwrap().expect("a clean stop");

    // A request still running at the drain deadline does not hold serve back.
    let (entered, mut arrivals) = tokio::sync::mpsc::unbounded_channel();
    let config = ListenerConfig {
        drain_deadline: Duration::from_millis(300),
        ..ListenerConfig::default()
    };
    let never = Arc::new(tokio::sync::Semaphore::new(0));
    let server = start_with(held_service(entered, never), config).await;
    let addr = server.addr;
    let stuck = tokio::spawn(async move { exchange(addr, b"GET /stuck HTTP/1.1\r\n\r\n").await });
    assert_eq!(arrivals.recv().await.unwrap(), "/stuck");
    let started = Instant::now();
    server.stop().await.expect("a clean stop");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    stuck.abort();
}

// ------------------------------------------------------------------------------------------------
// A raw `#` in the request target, through every way of serving the planes
// ------------------------------------------------------------------------------------------------

/// How the planes are served on loopback.
#[derive(Debug, Clone, Copy)]
enum Mount {
    /// `serve(router)`, as the binary does.
    Serve,
    /// `serve_with(router.with_fallback(runtime routes))`, as an embedding runtime does.
    Fallback,
    /// `serve_with(axum app with the router nested under /capsules/a)`.
    AxumNested,
}

impl Mount {
    fn prefix(self) -> &'static str {
        match self {
            Mount::AxumNested => "/capsules/a",
            _ => "",
        }
    }

    async fn start(self, w: &World) -> Running {
        let router = w.capsule.router();
        let config = ListenerConfig::default();
        match self {
            Mount::Serve => {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                let served = tokio::spawn(serve(listener, router, config, async move {
                    let _ = stopped.await;
                }));
                Running {
                    addr,
                    stop: Some(stop),
                    served,
                }
            }
            Mount::Fallback => {
                let own = counting_service(Arc::new(AtomicUsize::new(0)));
                start_with(router.with_fallback(own), config).await
            }
            Mount::AxumNested => {
                let app = axum::Router::new()
                    .route("/healthz", get(|| async { "ok" }))
                    .nest_service("/capsules/a", router);
                start_with(app, config).await
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_hash_is_a_name_byte_however_the_planes_are_mounted() {
    for mount in [Mount::Serve, Mount::Fallback, Mount::AxumNested] {
        let w = world("a");
        let server = mount.start(&w).await;
        let prefix = mount.prefix();
        let get = |target: String| async move {
            let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
            parse_reply(&exchange(server.addr, request.as_bytes()).await)
        };

        let missing = get(format!("{prefix}/resources/files/report.md#frag")).await;
        assert_eq!(missing.status, 404, "{mount:?}");
        assert_eq!(error_code(&missing.body), "not_found", "{mount:?}");
        let named = get(format!("{prefix}/resources/files/r.md#frag")).await;
        assert_eq!(named.status, 200, "{mount:?}");
        assert_eq!(named.body, HASH_NAMED, "{mount:?}");
        let listing = get(format!("{prefix}/resources/files#x")).await;
        assert_eq!(listing.status, 404, "{mount:?}: `files#x` is no listing");
        let plain = get(format!("{prefix}/resources/files/report.md")).await;
        assert_eq!(plain.body, report("a"), "{mount:?}");
        assert_eq!(
            traced(&w),
            vec![
                ("resource_read".to_owned(), Value::from("report.md#frag")),
                ("resource_read".to_owned(), Value::from("r.md#frag")),
                // An unknown route is recorded as sent (D-6.2 decodes only a read's path).
                (
                    "resource_read".to_owned(),
                    Value::from("/resources/files%23x")
                ),
                ("resource_read".to_owned(), Value::from("report.md")),
            ],
            "{mount:?}"
        );
        server.stop().await.unwrap();
    }
}

/// Without the hardening, hyper's URI parser cuts a raw `#` off as a fragment: the reason a
/// runtime serves the planes through `serve_with` (or a `VersionGate` of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_hardening_hyper_cuts_the_fragment_off() {
    let w = world("a");
    let app = axum::Router::new().nest_service("/capsules/a", w.capsule.router());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = tokio::spawn(async move { axum::serve(listener, app).await });
    let reply = parse_reply(
        &exchange(
            addr,
            b"GET /capsules/a/resources/files/report.md#frag HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await,
    );
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, report("a"));
    assert_eq!(
        traced(&w),
        vec![("resource_read".to_owned(), Value::from("report.md"))]
    );
    served.abort();
}

// ------------------------------------------------------------------------------------------------
// Worlds
// ------------------------------------------------------------------------------------------------

/// One capsule over an in-memory filesystem, with its trace recorded: exporting `out/` with
/// `report.md`, `sub/x.md` and `r.md#frag`; `tag` is written into `report.md` so that two
/// capsules' answers differ.
fn world(tag: &str) -> World {
    World::builder(&format!(
        "name: {tag}\nexports:\n  files: {{ root: out/, mode: read-only }}\n"
    ))
    .now(1_755_950_000_123)
    .fresh_key()
    .file("out/report.md", report(tag), MTIME)
    .file("out/sub/x.md", "x", MTIME)
    .file("out/r.md#frag", HASH_NAMED, MTIME)
    .file("secret.txt", "outside the root", MTIME)
    .build()
}

/// The bytes of `report.md` in the world of `tag`.
fn report(tag: &str) -> Vec<u8> {
    [REPORT, tag.as_bytes()].concat()
}

/// The trace lines so far, as (event_type, path-or-root).
fn traced(w: &World) -> Vec<(String, Value)> {
    w.events()
        .into_iter()
        .map(|e| {
            let kind = e["event_type"].as_str().expect("event_type").to_owned();
            let what = if kind == "resource_list" {
                e["root"].clone()
            } else {
                e["path"].clone()
            };
            (kind, what)
        })
        .collect()
}

fn get_request<B>(path: &str, body: B) -> Request<B> {
    Request::get(path).body(body).expect("request")
}

/// The JSON error code of a refusal body.
fn error_code(body: &[u8]) -> String {
    let json: Value = serde_json::from_slice(body).expect("a JSON refusal");
    json["error"].as_str().expect("error").to_owned()
}

/// The defaults `ListenerConfig`'s field docs state, one by one: a change to either the code or
/// the docs must change this test too.
#[test]
fn listener_config_defaults_are_the_documented_ones() {
    let config = ListenerConfig::default();
    assert_eq!(config.max_connections, 2048);
    assert_eq!(config.header_read_timeout, Duration::from_secs(10));
    assert_eq!(config.max_head_bytes, 16 * 1024);
    assert_eq!(config.drain_deadline, Duration::from_secs(5));
    assert_eq!(config.send_timeout, Duration::from_secs(60));
}
