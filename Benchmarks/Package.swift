// swift-tools-version:6.2
import PackageDescription

// pushgate-bench, the benchmark tool (docs/benchmarks.md, scripts/bench-gateway.sh, scripts/soak.sh), in
// a package of its own beside pushgate's, so that building, testing or depending on pushgate does not
// build it. It depends on pushgate by path and builds the `pushgate` executable it runs as well:
//     swift build -c release --package-path Benchmarks --product pushgate
//     swift build -c release --package-path Benchmarks --product pushgate-bench
//     swift test --package-path Benchmarks          # its own tests (pure: verdicts, options, readers)

// Benchmarks time the real code through its `package` declarations (the HTTP/2 connection handler, the
// codecs, the store's benchmark hooks), not a copy of it. Swift grants `package` access to modules
// compiled with the same -package-name, which SwiftPM derives from a package's identity: for pushgate,
// a path dependency here, that is the name of its folder, lowercased, with every character outside
// [a-z0-9_] made '_' (SwiftPM's C99-identifier mangling; only ASCII folder names are handled here).
// Our targets are compiled with that name instead of their own: `packageAccess: false` keeps SwiftPM
// from passing theirs (it would come after ours, and the last one wins).
let pushgateFolder = Context.packageDirectory.split(separator: "/").dropLast().last.map(String.init) ?? "pushgate"
let pushgatePackageName: String = {
    let mangled = String(
        pushgateFolder.lowercased().map { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "_" ? $0 : "_" }
    )
    return mangled.first?.isNumber == true ? "_" + mangled : mangled
}()

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .treatAllWarnings(as: .error),
    .unsafeFlags(["-package-name", pushgatePackageName]),
]

let package = Package(
    name: "pushgate-benchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushgate-bench", targets: ["pushgate-bench"])
    ],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "pushgate-bench",
            dependencies: [
                .product(name: "PushgateCore", package: pushgateFolder),
                .product(name: "APNsHTTP2", package: pushgateFolder),
                .product(name: "PushTransport", package: pushgateFolder),
                .product(name: "APNsTransport", package: pushgateFolder),
                .product(name: "APNsSimulator", package: pushgateFolder),
                .product(name: "PushgateSQLite", package: pushgateFolder),
                // `transactional --postgres`: fills the gateway's PostgreSQL store.
                .product(name: "PushgatePostgres", package: pushgateFolder),
                // `soak`: reads the gateway's store at the end (skipped targets).
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // `micro`: the real codecs and the HTTP/2 connection handler on an EmbeddedChannel.
                .product(name: "PushgateUDP", package: pushgateFolder),
                .product(name: "APNsLegacy", package: pushgateFolder),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                // `micro`: Web Push's per-message encryption and VAPID signing.
                .product(name: "WebPush", package: pushgateFolder),
                // `webpush`: the Web Push client and service against the Web Push simulator, in process.
                .product(name: "WebPushTransport", package: pushgateFolder),
                .product(name: "WebPushSimulator", package: pushgateFolder),
            ],
            packageAccess: false,
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushgateBenchTests",
            dependencies: [
                "pushgate-bench",
                .product(name: "PushgateSQLite", package: pushgateFolder),
                .product(name: "PushgateCore", package: pushgateFolder),
            ],
            packageAccess: false,
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
