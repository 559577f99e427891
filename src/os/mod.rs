//! The simulated machine under every host: a page-cache disk that outlives its process,
//! and the simulated clock that the world publishes.

pub mod clock;
pub mod disk;
pub mod pages;
