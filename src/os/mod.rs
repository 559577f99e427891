//! The simulated machine under every host: a page-cache disk that outlives its process,
//! the simulated clock that the world publishes, and the frames its TCP carries.

pub mod clock;
pub mod disk;
pub mod frame;
pub mod pages;
