//! `resources/list` cursors (D-18.2): the last path a page returned, signed by a key of this
//! service, so that a page after it starts at the first path after it whatever changed in
//! between, and a cursor this service did not issue is refused.

use crate::backends::{KeyStore, OsRandomKeyStore, Random};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The domain of a cursor's MAC, so that the key signs nothing else's bytes.
const DOMAIN: &[u8] = b"resource-plane mcp cursor v1\x1f";
/// The prefix that names the cursor format.
const PREFIX: &str = "c1.";

/// Issues and opens cursors with one key, drawn when the service is built.
#[derive(Debug)]
pub(crate) struct Cursors {
    key: OsRandomKeyStore,
}

impl Cursors {
    pub(crate) fn new(random: &dyn Random) -> Self {
        Cursors {
            key: OsRandomKeyStore::generate_from(random),
        }
    }

    /// The cursor after `path`: `c1.<path>.<mac>`, both base64url without padding.
    pub(crate) fn issue(&self, path: &str) -> String {
        let tag = self.key.sign(&[DOMAIN, path.as_bytes()]).unwrap_or([0; 32]);
        format!(
            "{PREFIX}{}.{}",
            URL_SAFE_NO_PAD.encode(path),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The path a cursor names, when this service issued it; `None` for anything else.
    pub(crate) fn open(&self, cursor: &str) -> Option<String> {
        if cursor.len() > MAX_CURSOR_BYTES {
            return None;
        }
        let (path, tag) = cursor.strip_prefix(PREFIX)?.split_once('.')?;
        let path = URL_SAFE_NO_PAD.decode(path).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        if !self.key.verify(&[DOMAIN, &path], &tag) {
            return None;
        }
        String::from_utf8(path).ok()
    }
}

/// The longest cursor read: a path of 4 KiB, encoded, and its tag.
const MAX_CURSOR_BYTES: usize = 8 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::SeededRandom;

    #[test]
    fn a_cursor_opens_to_its_path_and_a_forged_or_foreign_one_does_not() {
        let cursors = Cursors::new(&SeededRandom::new([1; 32]));
        let cursor = cursors.issue("dir/a b.txt");
        assert_eq!(cursors.open(&cursor).as_deref(), Some("dir/a b.txt"));
        // Another path under the same tag.
        let (_, tag) = cursor.rsplit_once('.').unwrap();
        let forged = format!("c1.{}.{tag}", URL_SAFE_NO_PAD.encode("zzz"));
        assert_eq!(cursors.open(&forged), None);
        // Another service's key.
        let other = Cursors::new(&SeededRandom::new([2; 32]));
        assert_eq!(other.open(&cursor), None);
        for junk in ["", "c1.", "c1.x", "c2.YQ.AA", "not a cursor", "c1.!!.!!"] {
            assert_eq!(cursors.open(junk), None, "{junk:?}");
        }
        assert_eq!(cursors.open(&"c".repeat(MAX_CURSOR_BYTES + 1)), None);
    }
}
