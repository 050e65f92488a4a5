fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnpu_sim_core.so");
}
