fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libascend_hal.so");
}
