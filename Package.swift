// swift-tools-version:6.2
import PackageDescription

// Targets are split by purity and dependency (STYLE.md §13):
//   PushgateCore   pure domain + APNs vocabulary + JWT + retry policy (swift-crypto only)
//   PushTransport  the neutral transport layer (pool, TLS, HTTP/2 engine) and `PushService`, the one
//                  protocol through which the dispatcher knows a push service
//   APNsTransport  what APNs's two transports share (`APNsRequest`, `PreparedNotification`) and APNs's
//                  `PushService` plug-in (`APNsPushService`)
//   APNsHTTP2      the APNs HTTP/2 plug-in of PushTransport (main type `APNsClient`), depends on PushgateCore
//   APNsSimulator  an independent APNs on loopback; deliberately does NOT import PushgateCore so
//                  that its validation, written from Apple's documentation, cannot share a bug
//                  with the client's
//   pushgate       the executable composing them
// Only tests and benchmarks join the client to the simulator. The benchmark tool, pushgate-bench,
// is the sibling package Benchmarks/ (building or testing pushgate does not build it).

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    // Our targets only: a warning in our code fails the build (CI's "warnings as errors").
    .treatAllWarnings(as: .error),
]

// The per-notification path (the HTTP/2 engine, the services' exchanges specialised from it, the
// dispatcher): in release builds, no run-time exclusivity checks. Each access to a stored property of
// a class (the connection handler's streams, windows, encoder...) otherwise calls into the runtime,
// about a twentieth of the gateway's CPU per notification. The checks stay on in debug builds, which
// is what the tests run. (unsafeFlags: SwiftPM accepts them in a root package, which is how pushgate
// is built and deployed, and in a local one such as Benchmarks/'s `.package(path: "..")`; a package
// depending on this one by URL cannot use these targets.)
let hotPathSettings: [SwiftSetting] =
    swiftSettings + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "pushgate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushgate", targets: ["pushgate"]),
        .library(name: "PushgateCore", targets: ["PushgateCore"]),
        .library(name: "PushTransport", targets: ["PushTransport"]),
        .library(name: "APNsTransport", targets: ["APNsTransport"]),
        .library(name: "APNsHTTP2", targets: ["APNsHTTP2"]),
        .library(name: "APNsSimulator", targets: ["APNsSimulator"]),
        .library(name: "FCMSimulator", targets: ["FCMSimulator"]),
        .library(name: "WebPush", targets: ["WebPush"]),
        .library(name: "WebPushSimulator", targets: ["WebPushSimulator"]),
        .library(name: "WebPushTransport", targets: ["WebPushTransport"]),
        // For the sibling package Benchmarks/ (pushgate-bench), which depends on this one by path.
        .library(name: "PushgateSQLite", targets: ["PushgateSQLite"]),
        .library(name: "PushgatePostgres", targets: ["PushgatePostgres"]),
        .library(name: "PushgateUDP", targets: ["PushgateUDP"]),
        .library(name: "APNsLegacy", targets: ["APNsLegacy"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: [.defaults, "YAML", "CommandLineArguments"]),
    ],
    targets: [
        .target(
            name: "PushgateCore",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: hotPathSettings
        ),
        // The transport layer: the neutral types (PushNotificationTransport, PushTransportFailure, Endpoint,
        // TrustRoots, ClientCertificate), the pool state machine and its one driver, one TLS set-up, one
        // bootstrap; and `PushService`, a push service as the dispatcher knows it. APNsHTTP2, APNsLegacy
        // (binary) and FCMTransport are plug-ins owning only their codec and handler.
        .target(
            name: "PushTransport",
            dependencies: [
                "PushgateCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: hotPathSettings
        ),
        // APNs's side of the transport shared by its HTTP/2 and legacy clients (`APNsRequest`,
        // `PreparedNotification`, `APNsNotificationTransport`), and APNs's plug-in of the dispatcher
        // (`APNsPushService`).
        .target(
            name: "APNsTransport",
            dependencies: [
                "PushgateCore",
                "PushTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: hotPathSettings
        ),
        .target(
            name: "APNsHTTP2",
            dependencies: [
                "PushgateCore",
                "PushTransport",
                "APNsTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "APNsSimulator",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // An independent FCM HTTP v1 on loopback (token endpoint, messages:send, control API); like
        // APNsSimulator it does NOT import PushgateCore. It borrows only APNsSimulator's test CA.
        .target(
            name: "FCMSimulator",
            dependencies: [
                "APNsSimulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // An independent Web Push service on loopback (several origins, VAPID checks, decryption with the
        // subscriptions' keys, scripted answers, control API); like the other simulators it does NOT import
        // the client's code (WebPush, PushgateCore). It borrows only APNsSimulator's test CA and listeners.
        .target(
            name: "WebPushSimulator",
            dependencies: [
                "APNsSimulator",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // FCM's side of the transport: `FCMClient`, the HTTP/2 send plug-in, the access-token exchange
        // (AsyncHTTPClient, used for nothing else), and FCM's plug-in of the dispatcher (`FCMPushService`).
        .target(
            name: "FCMTransport",
            dependencies: [
                "PushgateCore", "PushTransport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: hotPathSettings
        ),
        // Web Push's own parts (RFC 8030, 8291, 8292), pure: subscriptions, aes128gcm encryption, VAPID
        // tokens and their per-origin cache, the request headers and payload, the answer mapping.
        .target(
            name: "WebPush",
            dependencies: [
                "PushgateCore",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // Web Push's side of the transport: `WebPushClient` (a pool per origin on the shared pool, HTTP/2 on
        // the shared engine or HTTP/1.1 keep-alive as ALPN decides, VAPID tokens per origin) and Web Push's
        // plug-in of the dispatcher (`WebPushPushService`).
        .target(
            name: "WebPushTransport",
            dependencies: [
                "PushgateCore", "PushTransport", "WebPush",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: hotPathSettings
        ),
        .target(
            name: "PushgateSQLite",
            dependencies: [
                "PushgateCore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The PostgreSQL store: the same `PushStore` for several gateway instances sharing one database.
        .target(
            name: "PushgatePostgres",
            dependencies: [
                "PushgateCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The store conformance suite: checks every `PushStore` implementation runs unchanged
        // (SQLite now, PostgreSQL later). Plain throwing functions, so it needs no test framework.
        .target(
            name: "StoreConformance",
            dependencies: ["PushgateCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // Apple's retired binary provider interface: frame codecs and the feedback tuple decoder (pure),
        // the pooled legacy sender (a `NotificationTransport`) and the feedback poller.
        .target(
            name: "APNsLegacy",
            dependencies: [
                "PushgateCore",
                "PushTransport",
                "APNsTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP API (JSON, /v1) on Hummingbird.
        .target(
            name: "PushgateHTTP",
            dependencies: [
                "PushgateCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                // TLS on the API: HummingbirdTLS's channel shape, with a context a reload can replace.
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            resources: [.copy("Resources/openapi.yaml")],
            swiftSettings: swiftSettings
        ),
        // The pushd-compatible UDP ingress: datagram parsing (pure) and the listener.
        .target(
            name: "PushgateUDP",
            dependencies: [
                "PushgateCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The dispatcher: ledger work (chunks, retries) streamed into the push services, which it knows only
        // as `PushService`s (it imports no service's target).
        .target(
            name: "PushgateDispatch",
            dependencies: [
                "PushgateCore",
                "PushTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: hotPathSettings
        ),
        // The configuration: YAML file, environment and flags (pushd's included) resolved into one
        // validated value per app; every problem named by its key (exit 78).
        .target(
            name: "PushgateConfig",
            dependencies: [
                "PushgateCore", "APNsHTTP2", "PushTransport", "PushgateHTTP", "WebPush",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The composition of store, APNs client, dispatcher and UDP ingress: one function for `main`
        // and the end-to-end tests.
        .target(
            name: "PushgateGateway",
            dependencies: [
                "PushgateCore", "APNsHTTP2", "PushTransport", "APNsTransport", "FCMTransport", "APNsLegacy", "PushgateSQLite", "PushgatePostgres", "PushgateUDP", "PushgateDispatch",
                "PushgateHTTP", "PushgateConfig", "WebPushTransport", "WebPush",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "pushgate",
            dependencies: [
                "PushgateCore",
                "APNsHTTP2", "PushTransport", "APNsTransport",
                "FCMTransport",
                "APNsSimulator", "FCMSimulator",
                "WebPush", "WebPushSimulator", "WebPushTransport",
                "PushgateSQLite",
                "PushgateUDP",
                "PushgateDispatch",
                "PushgateGateway",
                "PushgateConfig",
                "APNsLegacy",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushgateCoreTests",
            dependencies: ["PushgateCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushgateCommandTests",
            dependencies: [
                "pushgate", "PushgateConfig", "PushgateGateway", "PushgatePostgres", "WebPush",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsHTTP2Tests",
            dependencies: [
                "APNsHTTP2", "PushTransport", "APNsTransport", "PushgateCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushTransportTests",
            dependencies: [
                "PushTransport", "PushgateCore",
                // The pool's tests carry APNs requests, the pool's first kind.
                "APNsTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: [
                "APNsSimulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FCMSimulatorTests",
            dependencies: [
                "FCMSimulator", "APNsSimulator", "PushgateCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FCMTransportTests",
            dependencies: [
                "FCMTransport", "FCMSimulator", "PushgateCore", "PushTransport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "WebPushTests",
            dependencies: [
                "WebPush", "PushgateCore",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The WebPush module against the simulator over loopback, and both (and a whole message as
        // WebPushPushService builds it) against Python's http_ece, py_vapid and pywebpush (installed by .ci/run).
        .testTarget(
            name: "WebPushSimulatorTests",
            dependencies: [
                "WebPushSimulator", "WebPush", "PushgateCore", "WebPushTransport", "PushTransport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The Web Push client's machines (layer 1) and the client against the simulator over loopback (layer 3).
        .testTarget(
            name: "WebPushTransportTests",
            dependencies: [
                "WebPushTransport", "WebPushSimulator", "WebPush", "PushTransport", "PushgateCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushgateSQLiteTests",
            dependencies: [
                "PushgateSQLite", "StoreConformance", "PushgateCore", .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // Runs against the PostgreSQL server named by PUSHGATE_TEST_POSTGRES_URL (CI always names one);
        // without it the suites are skipped, saying so.
        .testTarget(
            name: "PushgatePostgresTests",
            dependencies: [
                "PushgatePostgres", "StoreConformance", "PushgateCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushgateConfigTests",
            dependencies: [
                "PushgateConfig", "PushgateCore", "FCMSimulator",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsLegacyTests",
            dependencies: [
                "APNsLegacy", "PushgateCore", "PushTransport", "APNsTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushgateHTTPTests",
            dependencies: [
                "PushgateHTTP", "PushgateCore", "PushgateSQLite",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushgateUDPTests",
            dependencies: [
                "PushgateUDP", "PushgateCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "APNsHTTP2", "PushTransport", "APNsTransport", "APNsSimulator", "APNsLegacy", "PushgateCore", "PushgateSQLite", "PushgatePostgres", "PushgateDispatch", "StoreConformance",
                "PushgateUDP", "PushgateGateway", "PushgateConfig",
                "PushgateHTTP",
                "FCMTransport", "FCMSimulator", "WebPushSimulator", "WebPushTransport",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Fuzzing (scripts/fuzz.sh, docs/reliability.md): one function per parser family checking its
        // invariants; the libFuzzer shim is built only by the script (-D FUZZING -sanitize=fuzzer,address),
        // a plain build makes it an executable that says so; the test target replays the corpus.
        .target(
            name: "FuzzEntryPoints",
            dependencies: [
                "PushgateCore", "PushgateUDP", "PushgateHTTP", "PushgateSQLite", "APNsLegacy", "PushTransport",
                "APNsHTTP2",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "pushgate-fuzz",
            dependencies: ["FuzzEntryPoints"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FuzzEntryPointsTests",
            dependencies: ["FuzzEntryPoints"],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
