//! mockall doubles of the filesystem and the clock, for the tests that prove a step never
//! touches one (`times(0)`) or touches it exactly so often. A mock checks its `times` when it
//! is dropped, and fails the test on any call it does not expect.

use resource_plane::backends::{Clock, Filesystem, FsError, FsErrorKind, RootDir};
use resource_plane::scope::{Containment, RootPath};

mockall::mock! {
    pub Fs {}
    impl Filesystem for Fs {
        fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError>;
        fn check_root(&self, root: &RootPath) -> Result<(), FsError>;
        fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError>;
        fn unland(&self, dir: &str, name: &str) -> Result<(), FsError>;
    }
}

mockall::mock! {
    pub Clk {}
    impl Clock for Clk {
        fn now_ms(&self) -> i64;
    }
}

// The traits ask for `Debug`, which mockall does not derive.
impl std::fmt::Debug for MockFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MockFs")
    }
}

impl std::fmt::Debug for MockClk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MockClk")
    }
}

/// A filesystem whose root may be opened exactly `opens` times, finding no root each time;
/// any other call fails the test.
pub fn rootless_fs(opens: usize) -> MockFs {
    let mut fs = MockFs::new();
    fs.expect_open_root()
        .times(opens)
        .returning(|_, _| Err(FsError::new(FsErrorKind::NotFound, "mock: no root")));
    fs.expect_check_root().times(0);
    fs.expect_land().times(0);
    fs
}

/// A clock that may be read exactly `reads` times, saying `now_ms` each time.
pub fn clock_read(reads: usize, now_ms: i64) -> MockClk {
    let mut clock = MockClk::new();
    clock.expect_now_ms().times(reads).returning(move || now_ms);
    clock
}
