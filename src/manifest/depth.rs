//! A linear pre-scan of a YAML text's nesting depth, run before the parser (D-15.8).
//!
//! The parser reads a whole document's events before its own depth limit applies, and its time
//! grows faster than linearly with the nesting: 100,000 levels of `[` took it about 20 s to
//! refuse. This scan reads each byte once and stops at the first place the nesting passes the
//! limit, so a too-deep manifest is refused in time linear in the bytes read.
//!
//! It counts, conservatively (a level it cannot tell from text counts as one):
//!
//! * flow collections: a `[` or `{` where a node can start (at the start of a value, after a
//!   `,`, `[`, `{`, `- `, `? ` or `: `, past any anchor or tag), closed by `]` or `}`;
//! * block nodes: one level per indentation deeper than the enclosing line's, and one per `- `
//!   or `? ` indicator that opens a line's content (`- - - x` is three).
//!
//! Quoted scalars (which may span lines), comments and the lines of block scalars (`|`, `>`)
//! are skipped: a `[` in them is text, not nesting.

/// The deepest nesting a manifest may have, as [`first_too_deep`] counts it: the parser's own
/// limit. A real manifest is under ten levels deep.
pub(super) const MAX_DEPTH: usize = 128;

/// Where (1-based line and column) `text` first nests deeper than `max` levels, or `None` when
/// it never does. Reads each byte at most once.
pub(super) fn first_too_deep(text: &str, max: usize) -> Option<(usize, usize)> {
    let mut scan = Scan {
        max,
        blocks: Vec::new(),
        flow: 0,
        quote: None,
        block_scalar: None,
        token_start: true,
    };
    for (index, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line).as_bytes();
        if let Some(column) = scan.line(line) {
            return Some((index + 1, column + 1));
        }
    }
    None
}

/// The scan's state between lines.
struct Scan {
    max: usize,
    /// The indentation columns of the open block nodes, innermost last.
    blocks: Vec<usize>,
    /// Open flow collections.
    flow: usize,
    /// The quote (`"` or `'`) of a quoted scalar still open.
    quote: Option<u8>,
    /// The indentation of the line that opened a block scalar still being read: its lines are
    /// those more indented than this, and blank lines.
    block_scalar: Option<usize>,
    /// Whether a node may start at the next non-blank byte.
    token_start: bool,
}

impl Scan {
    fn too_deep(&self) -> bool {
        self.blocks.len() + self.flow > self.max
    }

    /// Reads one line (no line break); the 0-based column where the nesting passes the limit.
    fn line(&mut self, line: &[u8]) -> Option<usize> {
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        let blank = indent == line.len();
        if let Some(parent) = self.block_scalar {
            if blank || indent > parent {
                return None;
            }
            self.block_scalar = None;
        }
        let mut at = 0;
        if self.quote.is_none() && self.flow == 0 {
            if blank || line[indent] == b'#' {
                return None;
            }
            while self.blocks.last().is_some_and(|&top| top > indent) {
                self.blocks.pop();
            }
            if self.blocks.last() != Some(&indent) {
                self.blocks.push(indent);
            }
            if self.too_deep() {
                return Some(indent);
            }
            at = indent;
            // `- `, `? `: each opens a node whose content starts further right.
            while at < line.len()
                && matches!(line[at], b'-' | b'?')
                && line.get(at + 1).is_none_or(|&b| b == b' ')
            {
                at += 1;
                while line.get(at) == Some(&b' ') {
                    at += 1;
                }
                if at < line.len() {
                    self.blocks.push(at);
                    if self.too_deep() {
                        return Some(at);
                    }
                }
            }
            self.token_start = true;
        }
        self.rest(line, at, indent)
    }

    /// Reads `line` from `at`: quotes, comments, flow indicators, block scalar headers.
    fn rest(&mut self, line: &[u8], mut at: usize, indent: usize) -> Option<usize> {
        while at < line.len() {
            let byte = line[at];
            if let Some(quote) = self.quote {
                match byte {
                    b'\\' if quote == b'"' => at += 1,
                    b'\'' if quote == b'\'' && line.get(at + 1) == Some(&b'\'') => at += 1,
                    _ if byte == quote => {
                        self.quote = None;
                        self.token_start = false;
                    }
                    _ => {}
                }
                at += 1;
                continue;
            }
            match byte {
                b' ' | b'\t' => {}
                b'#' if at == 0 || matches!(line[at - 1], b' ' | b'\t') => return None,
                b'"' | b'\'' if self.token_start => self.quote = Some(byte),
                b'[' | b'{' if self.token_start => {
                    self.flow += 1;
                    if self.too_deep() {
                        return Some(at);
                    }
                }
                b']' | b'}' if self.flow > 0 => {
                    self.flow -= 1;
                    self.token_start = false;
                }
                b',' if self.flow > 0 => self.token_start = true,
                b':' if line.get(at + 1).is_none_or(|&b| b == b' ' || b == b'\t')
                    || self.flow > 0 =>
                {
                    self.token_start = true;
                }
                b'-' | b'?' if self.token_start && line.get(at + 1).is_none_or(|&b| b == b' ') => {}
                b'|' | b'>' if self.token_start && self.flow == 0 => {
                    self.block_scalar = Some(indent);
                    return None;
                }
                b'&' | b'!' if self.token_start => {
                    // An anchor or a tag: the node it belongs to starts after it.
                    while at + 1 < line.len() && !matches!(line[at + 1], b' ' | b'\t') {
                        at += 1;
                    }
                }
                _ => self.token_start = false,
            }
            at += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_limit(text: &str) -> Option<usize> {
        (0..40).find(|&max| first_too_deep(text, max).is_none())
    }

    #[test]
    fn flow_nesting_is_counted_where_nodes_start() {
        assert_eq!(depth_limit("a: [[[x]]]"), Some(4));
        assert_eq!(depth_limit("a: {b: {c: [1, [2]]}}"), Some(5));
        assert_eq!(depth_limit("a: &x !t [[1]]"), Some(3));
        assert_eq!(
            first_too_deep("name: x\nzzz: [[[[", 3),
            Some((2, 8)),
            "the fourth level: line 2, the third `[` (1-based column)"
        );
        // A flow collection may span lines.
        assert_eq!(depth_limit("a: [\n  [\n    [x],\n  ]\n]\nb: 1"), Some(4));
    }

    #[test]
    fn brackets_in_text_are_not_nesting() {
        for text in [
            "a: '[[[[[['",
            "a: \"[[[[[[\\\"[[[\"",
            "a: 'it''s [[[[[['",
            "a: x[[[[[[",
            "a: 1 # [[[[[[",
            "# [[[[[[\na: 1",
            "a: |\n  [[[[[[\n\n  {{{{{{\nb: 1",
            "a: >-\n  [[[[[[\nb: 1",
            "a: \"multi\n  [[[[[[ line\"\nb: 1",
        ] {
            assert_eq!(depth_limit(text), Some(1), "{text:?}");
        }
    }

    #[test]
    fn block_nesting_is_counted_by_indentation_and_indicators() {
        assert_eq!(depth_limit("a:\n b:\n  c:\n   d: 1"), Some(4));
        assert_eq!(depth_limit("a:\n b:\n  c: 1\nd:\n e: 1"), Some(3));
        assert_eq!(depth_limit("- - - x"), Some(4));
        assert_eq!(depth_limit("a:\n- b\n- c"), Some(2));
        assert_eq!(depth_limit("? - x\n: y"), Some(3));
    }

    #[test]
    fn a_real_manifest_is_shallow() {
        let manifest = "name: Reporter\nexports:\n  files:      { root: out/, mode: read-only }\n  \
                        peer_files: { root: out/, max_ttl: 15m }\ncapabilities:\n  \
                        peer_fetch: { allow: [\"localhost:41234\"] }\n  \
                        network:    { allow: [\"127.0.0.1\"] }\nlifecycle: { after_task: exit }\n";
        assert!(depth_limit(manifest).is_some_and(|d| d <= 5));
    }

    #[test]
    fn a_hundred_thousand_levels_are_refused_at_the_first_one_too_many() {
        let n = 100_000;
        for (text, line) in [
            (format!("a: {}{}", "[".repeat(n), "]".repeat(n)), 1),
            (format!("a: {}1{}", "{a: ".repeat(n), "}".repeat(n)), 1),
            // Indentation grows with the depth, so block nesting is quadratic in bytes: 1,000.
            (
                (0..1_000)
                    .map(|i| format!("{}a:\n", " ".repeat(i)))
                    .collect(),
                MAX_DEPTH + 1,
            ),
            ("- ".repeat(n) + "x", 1),
        ] {
            let found = first_too_deep(&text, MAX_DEPTH).expect("too deep");
            assert_eq!(found.0, line, "{}", &text[..20]);
        }
    }
}
