//! Property tests: parsers (being written).
