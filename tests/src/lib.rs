//! Shared helpers of the end-to-end tests live in the test files themselves for now.
