//! The `remora` command's library: the pieces the binary and the test
//! suite share.

pub mod bundle;
pub mod generate;
pub mod generate_ad;
pub mod native;
pub mod repl;
pub mod testing;
