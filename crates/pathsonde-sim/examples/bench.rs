fn main() {
    let scale: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0.25);
    let r = pathsonde_sim::bench::run(scale, 1);
    println!("{}", serde_json::to_string_pretty(&r).unwrap());
}
