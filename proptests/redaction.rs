//! Property tests: redaction (being written).
