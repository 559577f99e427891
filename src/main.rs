fn main() {
    std::process::exit(hightide::cli::main());
}
