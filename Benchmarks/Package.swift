// swift-tools-version:6.2
import PackageDescription

// Micro-benchmarks for pushgate's per-notification hot path, on ordo-one/benchmark.
// A sibling package so the root package's build and tests stay untouched; it depends on the root
// by path. Run with `swift package benchmark` from this folder (see README.md).

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "pushgate-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "pushgate", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
    ],
    targets: [
        // Code the root package does not export, compiled here from the root's own files (symbolic
        // links, so there is no copy to drift): the UDP datagram parser (`PushgateUDP` has no
        // product), the dispatcher's per-device decision (`OutcomeDisposition` is internal) and the
        // APNs client's own HTTP/2 framing, frame parser and HPACK encoder (internal to `APNsClient`).
        .target(
            name: "APNsWireMirror",
            dependencies: [
                .product(name: "PushgateCore", package: "pushgate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Sources/APNsWireMirror",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "UDPDatagramMirror",
            dependencies: [
                .product(name: "PushgateCore", package: "pushgate"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Sources/UDPDatagramMirror",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "DispatchStepMirror",
            dependencies: [
                .product(name: "PushgateCore", package: "pushgate")
            ],
            path: "Sources/DispatchStepMirror",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "PushgateBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "PushgateCore", package: "pushgate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                "UDPDatagramMirror",
                "DispatchStepMirror",
                "APNsWireMirror",
            ],
            path: "Benchmarks/PushgateBenchmarks",
            swiftSettings: swiftSettings,
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
