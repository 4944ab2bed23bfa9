//! Property tests: path_resolution (being written).
