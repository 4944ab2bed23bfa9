//! The filesystem conformance suite (`tests/support/fs_suite.rs`) on the crate's own
//! implementations, unwrapped: [`MemoryFilesystem`](resource_plane::backends::MemoryFilesystem),
//! [`OsFilesystem`](resource_plane::backends::OsFilesystem) with `openat2`, and `OsFilesystem` on
//! the fallback walk. Test files that wrap a filesystem run the same suite on their wrapper with
//! [`fs_suite::run_all`].

mod support;

use support::fs_suite::{self, UNWRAPPED};

#[test]
fn os_strategies_are_as_requested() {
    fs_suite::os_strategies_are_as_requested(UNWRAPPED);
}

#[test]
fn resolution_table_conforms_in_every_implementation_and_class() {
    fs_suite::resolution_table_conforms_in_every_implementation_and_class(UNWRAPPED);
}

#[test]
fn path_max_boundary_conforms() {
    fs_suite::path_max_boundary_conforms(UNWRAPPED);
}

#[test]
fn open_root_conforms() {
    fs_suite::open_root_conforms(UNWRAPPED);
}

#[test]
fn root_replaced_after_construction_is_outside_root() {
    fs_suite::root_replaced_after_construction_is_outside_root(UNWRAPPED);
}

#[test]
fn check_root_conforms() {
    fs_suite::check_root_conforms(UNWRAPPED);
}

#[test]
fn walk_returns_files_and_symlinks_without_descending_links() {
    fs_suite::walk_returns_files_and_symlinks_without_descending_links(UNWRAPPED);
}

#[test]
fn walk_survives_a_tree_deeper_than_any_stack() {
    fs_suite::walk_survives_a_tree_deeper_than_any_stack(UNWRAPPED);
}

#[test]
fn listing_decided_by_open_file_agrees_across_implementations() {
    fs_suite::listing_decided_by_open_file_agrees_across_implementations(UNWRAPPED);
}

#[test]
fn land_conforms() {
    fs_suite::land_conforms(UNWRAPPED);
}

#[test]
fn canonical_paths_name_the_file_itself() {
    fs_suite::canonical_paths_name_the_file_itself(UNWRAPPED);
}

#[test]
fn unland_conforms() {
    fs_suite::unland_conforms(UNWRAPPED);
}

/// The suite's own forwarding adapter (which test wrappers generic over their inner filesystem
/// use to wrap the suite's) passes the suite too.
#[test]
fn the_shared_adapter_conforms() {
    fs_suite::run_all(fs_suite::Wrap {
        name: "Shared",
        wrap: |fs| std::sync::Arc::new(fs_suite::Shared(fs)),
    });
}
