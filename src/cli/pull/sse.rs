//! A Server-Sent Events parser (the WHATWG `text/event-stream` format) for the watch stream:
//! pure, fed the body's bytes as they come, bounded in what it holds.
//!
//! Lines end with CRLF, LF or a lone CR. A line starting with `:` is a comment; `field: value`
//! (one space after the colon dropped) sets `event`, `data` (appended, lines joined by `\n`) or
//! `id`; other fields (`retry` among them) are ignored, as the format says; a blank line ends
//! the event, which is dispatched when it has data. Stricter than the format where hostile
//! input could hurt: a line longer than [`Limits::line`] or an event whose data passes
//! [`Limits::event`] is an error, not a growing buffer, and bytes that are not UTF-8 are an
//! error, not replaced.

use std::fmt;

/// How much a parser holds at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The longest line, in bytes, its end excluded.
    pub(crate) line: usize,
    /// The most data one event may carry, in bytes.
    pub(crate) event: usize,
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// The `event` field; `message` when the event had none.
    pub(crate) kind: String,
    /// The event's own `id` field, when it had one.
    pub(crate) id: Option<String>,
    /// The data lines, joined with `\n`.
    pub(crate) data: String,
}

/// Why the stream cannot be read further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// A line passed the line limit (the limit).
    LineTooLong(usize),
    /// An event's data passed the event limit (the limit).
    EventTooLarge(usize),
    /// A line is not UTF-8.
    NotUtf8,
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::LineTooLong(limit) => write!(f, "a line longer than {limit} bytes"),
            SseError::EventTooLarge(limit) => {
                write!(f, "an event with more than {limit} bytes of data")
            }
            SseError::NotUtf8 => f.write_str("a line that is not UTF-8"),
        }
    }
}

/// The parser's state between chunks.
#[derive(Debug)]
pub(crate) struct Parser {
    limits: Limits,
    /// The line so far.
    line: Vec<u8>,
    /// The last byte seen was a CR: an LF right after it ends nothing more.
    after_cr: bool,
    /// No line has ended yet: a byte order mark starting the first is dropped.
    at_start: bool,
    kind: Option<String>,
    id: Option<String>,
    data: String,
    has_data: bool,
}

impl Parser {
    /// A parser for a new stream.
    pub(crate) fn new(limits: Limits) -> Self {
        Parser {
            limits,
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            kind: None,
            id: None,
            data: String::new(),
            has_data: false,
        }
    }

    /// Reads `bytes`, appending every event they complete to `events`.
    ///
    /// # Errors
    /// [`SseError`] at the first line or event over the limits, or not UTF-8; the parser must
    /// not be fed again after one (the stream is to be dropped).
    pub(crate) fn feed(
        &mut self,
        mut bytes: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), SseError> {
        while !bytes.is_empty() {
            if self.after_cr && bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
            self.after_cr = false;
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.extend_line(&bytes[..end])?;
                    self.after_cr = bytes[end] == b'\r';
                    bytes = &bytes[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    let mut line = line.as_slice();
                    if std::mem::take(&mut self.at_start) {
                        line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
                    }
                    self.line_ended(line, events)?;
                }
                None => {
                    self.extend_line(bytes)?;
                    bytes = &[];
                }
            }
        }
        Ok(())
    }

    fn extend_line(&mut self, part: &[u8]) -> Result<(), SseError> {
        if self.line.len() + part.len() > self.limits.line {
            return Err(SseError::LineTooLong(self.limits.line));
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn line_ended(&mut self, line: &[u8], events: &mut Vec<Event>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.kind = Some(value.to_owned()),
            "data" => {
                let added = value.len() + usize::from(self.has_data);
                if self.data.len() + added > self.limits.event {
                    return Err(SseError::EventTooLarge(self.limits.event));
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // The format ignores an id holding NUL.
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<Event>) {
        let kind = self.kind.take();
        let id = self.id.take();
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        events.push(Event {
            kind: kind.unwrap_or_else(|| "message".to_owned()),
            id,
            data: std::mem::take(&mut self.data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        line: 64,
        event: 128,
    };

    fn parse_in(chunks: &[&[u8]], limits: Limits) -> Result<Vec<Event>, SseError> {
        let mut parser = Parser::new(limits);
        let mut events = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut events)?;
        }
        Ok(events)
    }

    fn event(kind: &str, id: Option<&str>, data: &str) -> Event {
        Event {
            kind: kind.into(),
            id: id.map(Into::into),
            data: data.into(),
        }
    }

    #[test]
    fn events_comments_and_fields() {
        let stream = b": keep-alive\n\nevent: change\nid: e1\ndata: {\"a\":1}\n\n\
                       data:no space\ndata:  two spaces\n\nretry: 10\nunknown: x\nid\n\n\
                       event: reset\ndata\n\n";
        assert_eq!(
            parse_in(&[stream], SMALL).unwrap(),
            [
                event("change", Some("e1"), "{\"a\":1}"),
                event("message", None, "no space\n two spaces"),
                event("reset", None, ""),
            ]
        );
    }

    #[test]
    fn every_line_end_and_any_split_give_the_same_events() {
        let lf = "event: change\nid: x\ndata: a\ndata: b\n\n: c\ndata: z\n\n";
        let expected = vec![
            event("change", Some("x"), "a\nb"),
            event("message", None, "z"),
        ];
        for ending in ["\n", "\r\n", "\r"] {
            let text = format!("\u{feff}{}", lf.replace('\n', ending));
            let bytes = text.as_bytes();
            for split in 4..bytes.len() {
                let (a, b) = bytes.split_at(split);
                assert_eq!(
                    parse_in(&[a, b], SMALL).unwrap(),
                    expected,
                    "{ending:?} split at {split}"
                );
            }
            let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(parse_in(&one_by_one, SMALL).unwrap(), expected);
        }
    }

    #[test]
    fn an_event_cut_before_its_blank_line_is_never_dispatched() {
        assert_eq!(
            parse_in(&[b"event: change\nid: 2\ndata: {\"half\":"], SMALL).unwrap(),
            []
        );
        assert_eq!(
            parse_in(&[b"data: one\n\ndata: two\n"], SMALL).unwrap(),
            [event("message", None, "one")]
        );
    }

    #[test]
    fn an_id_does_not_leak_into_the_next_event() {
        assert_eq!(
            parse_in(&[b"id: 1\n\ndata: x\n\nid: a\0b\ndata: y\n\n"], SMALL).unwrap(),
            [event("message", None, "x"), event("message", None, "y")]
        );
    }

    #[test]
    fn a_line_over_the_limit_is_an_error_however_it_arrives() {
        let long = vec![b'a'; 65];
        assert_eq!(parse_in(&[&long], SMALL), Err(SseError::LineTooLong(64)));
        let halves: Vec<&[u8]> = long.chunks(7).collect();
        assert_eq!(parse_in(&halves, SMALL), Err(SseError::LineTooLong(64)));
        let comment = [b":".as_slice(), &[b'k'; 64], b"\n"].concat();
        assert_eq!(parse_in(&[&comment], SMALL), Err(SseError::LineTooLong(64)));
        let exactly = [vec![b'a'; 64], b"\n".to_vec()].concat();
        assert!(parse_in(&[&exactly], SMALL).is_ok());
    }

    #[test]
    fn data_over_the_event_limit_is_an_error() {
        let line = format!("data: {}\n", "d".repeat(50));
        let three = line.repeat(3);
        assert_eq!(
            parse_in(&[three.as_bytes()], SMALL),
            Err(SseError::EventTooLarge(128))
        );
        // The same data split over two events fits.
        let two_events = format!("{line}{line}\n{line}\n");
        assert_eq!(parse_in(&[two_events.as_bytes()], SMALL).unwrap().len(), 2);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_an_error() {
        assert_eq!(
            parse_in(&[b"data: \xff\xfe\n\n"], SMALL),
            Err(SseError::NotUtf8)
        );
    }
}
