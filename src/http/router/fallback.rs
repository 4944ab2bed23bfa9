//! The router beside a runtime's own routes: the paths it answers go to it, every other path to
//! the runtime's service.

use super::mount::Router;
use crate::http::body::PlaneBody;
use http::{Request, Response};
use http_body_util::Either;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_service::Service;

/// A [`Router`] in front of a runtime's own service ([`Router::with_fallback`]): a request for a
/// path the router [`answers`](Router::answers) goes to the router, any other to the fallback,
/// unchanged. The decision is on the raw path, as routing is (D-4.2).
///
/// A tower service for `http::Request<B>` when the fallback is one (and is `Clone + Send +
/// 'static`, with a `Send` future): its response body is
/// [`Either`]`<`[`PlaneBody`]`, FB>` (`Left` from the planes, `Right` from the fallback), its error the
/// fallback's. It is always ready: the fallback is cloned for each request it gets and made
/// ready then, so a request for the planes never waits on the fallback's readiness.
///
/// ```
/// use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
/// use http_body_util::Either;
/// use std::sync::Arc;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// # let manifest = Manifest::from_yaml(
/// #     "name: reporter\nexports: { files: { root: out/, mode: read-only } }",
/// # ).unwrap().manifest;
/// # let fs = Arc::new(MemoryFilesystem::new());
/// # fs.add_file("out/report.md", "hello", 1_700_000_000_000);
/// # let trace = Arc::new(RecordingTraceSink::new());
/// # let capsule = Capsule::launch(
/// #     &manifest,
/// #     CapsuleConfig::new("http://127.0.0.1:41234").unwrap(),
/// #     Backends { fs, clock: Arc::new(ManualClock::new(0)), keys: None, trace },
/// # ).unwrap();
/// // The runtime's own routes: anything the planes do not claim.
/// let own = tower::service_fn(|request: http::Request<String>| async move {
///     Ok::<_, std::convert::Infallible>(http::Response::new(format!("runtime: {}", request.uri())))
/// });
/// let app = capsule.router().with_fallback(own);
///
/// let planes = app.clone().oneshot(http::Request::get("/resources/files/report.md")
///     .body(String::new()).unwrap()).await.unwrap();
/// assert_eq!(planes.status(), 200);
/// assert!(matches!(planes.body(), Either::Left(_)));
///
/// let own = app.oneshot(http::Request::get("/healthz").body(String::new()).unwrap())
///     .await.unwrap();
/// assert!(matches!(own.into_body(), Either::Right(text) if text == "runtime: /healthz"));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct WithFallback<F> {
    router: Router,
    fallback: F,
}

impl<F> WithFallback<F> {
    /// The router requests for the planes go to.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The service every other request goes to.
    pub fn fallback(&self) -> &F {
        &self.fallback
    }
}

impl Router {
    /// This router in front of `fallback`: requests for the paths it
    /// [`answers`](Self::answers) (everything under `/resources` and the agent card, below its
    /// base path) go to the router, every other request to `fallback`, body and all. See
    /// [`WithFallback`].
    pub fn with_fallback<F>(&self, fallback: F) -> WithFallback<F> {
        WithFallback {
            router: self.clone(),
            fallback,
        }
    }
}

/// The future of [`WithFallback`]'s `call`.
pub(crate) type WithFallbackFuture<FB, E> =
    Pin<Box<dyn Future<Output = Result<Response<Either<PlaneBody, FB>>, E>> + Send + 'static>>;

impl<B, F, FB> Service<Request<B>> for WithFallback<F>
where
    B: Send + 'static,
    F: Service<Request<B>, Response = Response<FB>> + Clone + Send + 'static,
    F::Future: Send + 'static,
    F::Error: 'static,
    FB: 'static,
{
    type Response = Response<Either<PlaneBody, FB>>;
    type Error = F::Error;
    type Future = WithFallbackFuture<FB, F::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), F::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if self.router.answers(request.uri().path()) {
            let planes = Service::call(&mut self.router, request);
            return Box::pin(async move {
                let Ok(response) = planes.await;
                Ok(response.map(Either::Left))
            });
        }
        let mut fallback = self.fallback.clone();
        Box::pin(async move {
            std::future::poll_fn(|cx| fallback.poll_ready(cx)).await?;
            let response = fallback.call(request).await?;
            Ok(response.map(Either::Right))
        })
    }
}
