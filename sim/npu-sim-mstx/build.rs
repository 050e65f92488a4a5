fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libms_tools_ext.so");
}
