//! Property tests: handles (being written).
