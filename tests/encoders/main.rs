//! The Python and TypeScript packages' encoders against the crate: thousands of generated
//! messages written by each package, byte for byte the crate's `MappingEncoder`, and accepted by
//! the crate's decoder, the reference decoder (`tests/reference/`) and the package's own decoder.

mod python_encoder;
mod typescript_encoder;
