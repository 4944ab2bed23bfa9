//! The router's own unit tests: what the integration tests cannot see from outside.

use super::call::decode_once;
use crate::refusal::Code;

#[test]
fn a_read_path_is_decoded_once_for_the_plane_and_the_trace() {
    let (recorded, path) = decode_once("a%20b/c");
    assert_eq!(recorded, "a b/c");
    assert_eq!(path.unwrap().as_str(), "a b/c");
    // Decodes, but is refused lexically: recorded decoded.
    let (recorded, path) = decode_once("a/%2e%2e/b");
    assert_eq!(recorded, "a/../b");
    assert_eq!(path.unwrap_err().code, Code::OutsideRoot);
    // Does not decode: recorded as sent.
    let (recorded, path) = decode_once("%C3");
    assert_eq!(recorded, "%C3");
    assert_eq!(path.unwrap_err().code, Code::OutsideRoot);
    // Does not decode, but its valid escapes reveal a token: recorded with them decoded,
    // so the sink's redaction sees it (D-6.5).
    let (recorded, path) = decode_once("x/mh1%2Ea.b%zz");
    assert_eq!(recorded, "x/mh1.a.b%zz");
    assert_eq!(path.unwrap_err().code, Code::OutsideRoot);
}

/// The listing lent to MCP pages (`lend`).
#[cfg(all(feature = "mcp", feature = "test-util"))]
mod lent {
    use crate::test_util::capsule;
    use std::time::Duration;

    /// Pages are cut again only while the watcher's etag is the lent listing's own: for an
    /// unchanged export they agree, and a change parts them.
    #[tokio::test]
    async fn the_watchers_etag_is_a_lent_listings_own_until_the_export_changes() {
        let t = capsule("name: r\nexports: { files: { root: out/, mode: read-only } }");
        t.fs.add_file("out/a.md", "hello", 0);
        let router = t.capsule.router();
        assert_eq!(router.watched_etag(), None, "no watcher runs yet");
        // A stream followed by a task of its own keeps the watcher running.
        let mut stream = router.watch(None).unwrap();
        let following = tokio::spawn(async move {
            use futures_core::Stream;
            while std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx))
                .await
                .is_some()
            {}
        });
        let lent = router.lend_listing().await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while router.watched_etag().is_none() {
            assert!(tokio::time::Instant::now() < deadline, "the watcher lists");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(router.watched_etag().as_deref(), Some(lent.etag.as_str()));
        router.trace_relent(&lent).unwrap();
        let lines = t.trace.events();
        let (first, again) = (&lines[lines.len() - 2], &lines[lines.len() - 1]);
        assert_eq!(first["event_type"], "resource_list");
        assert_eq!(again["entry_count"], first["entry_count"]);
        assert_eq!(again["outcome"], "ok");

        t.fs.add_file("out/b.md", "new", 0);
        let changed = router.lend_listing().await.unwrap();
        assert_ne!(changed.etag, lent.etag);
        assert_eq!(changed.listing.len(), 2);
        following.abort();
    }
}
