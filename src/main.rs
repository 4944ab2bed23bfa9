//! The `resource-plane` binary: `serve` one capsule's planes from the command line, `check` a
//! manifest without serving, `pull` a capsule's files, or run the two-capsule `demo`
//! (`contract.md`). The command line lives in the library ([`resource_plane::cli`]).

fn main() -> std::process::ExitCode {
    resource_plane::cli::main()
}
