import Foundation
import GRDB
import PushgateCore
import Testing

@testable import PushgateSQLite

/// Schema v7: devices found by an integer key of (app, token) instead of `UNIQUE (app, token)`.
@Suite("SQLite store: the token key (schema v7)")
struct SQLiteTokenKeyTests {
    static let v5 = "v5: FCM, the request's fcm override"
    static let v6 = "v6: skipped targets, invalidated or removed after the request was stored"
    static let v7 = "v7: devices indexed by an integer key of the token"
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let app = Registration.defaultApp

    static func apns(_ number: Int) -> DeviceToken { try! DeviceToken(hex: String(format: "%064x", number)) }

    static func fcm(_ number: Int) -> DeviceToken {
        try! DeviceToken(fcm: String(format: "dK3v_%08d:APA91bH-", number) + String(repeating: "Qz7", count: 50))
    }

    static func registration(_ token: DeviceToken, app: String = app, group: String = "g") -> Registration {
        Registration(app: app, token: token, group: group, at: start)
    }

    /// Stored keys: these numbers are in files, so the function may never change. Reference values from an
    /// independent implementation of the documented steps (Python).
    @Test func theKeyFunctionGivesTheDocumentedNumbers() {
        let key = TokenKey.standard
        #expect(key(app: "default", token: Self.apns(1)) == 3_084_002_158_382_326_871)
        #expect(key(app: "other", token: Self.apns(1)) == 1_668_011_000_717_753_703)
        #expect(key(app: "default", token: Self.fcm(1)) == -9_081_678_740_807_027_029)
        #expect(key(app: "", storageKey: "") == 6_665_790_796_965_051_133)
    }

    @Test func apnsKeysAreNonNegativeAndFCMKeysNegativeAtEveryWidth() {
        for bits in [0, 1, 8, 63] {
            let key = TokenKey(bits: bits)
            for number in 1...100 {
                let apns = key(app: Self.app, token: Self.apns(number))
                #expect(apns >= 0)
                if bits < 63 { #expect(apns < 1 << bits) }
                #expect(key(app: Self.app, token: Self.fcm(number)) < 0)
            }
        }
        #expect(TokenKey(bits: 0)(app: Self.app, token: Self.apns(7)) == 0)
        #expect(TokenKey(bits: 0)(app: Self.app, token: Self.fcm(7)) == Int64.min)
    }

    /// One bit of key: 400 devices in two apps share four keys. Every operation that finds a device by
    /// token must find that one and no other.
    @Test func devicesWhoseKeysCollideStayDistinct() async throws {
        var configuration = SQLiteStore.Configuration()
        configuration.tokenKey = TokenKey(bits: 1)
        try await withTemporaryStore(configuration: configuration) { store in
            let tokens = (1...100).map(Self.apns) + (1...100).map(Self.fcm)
            let batch = tokens.map { Self.registration($0) } + tokens.map { Self.registration($0, app: "other") }
            let results = try await store.register(batch: batch + batch.prefix(3))
            #expect(results.prefix(400).allSatisfy { $0 == .created })
            #expect(results.suffix(3).allSatisfy { $0 == .alreadyMember }, "a repeat in the batch finds its device")
            let keys = try await store.read { db in
                try Int.fetchOne(db, sql: "SELECT count(DISTINCT token_key) FROM device") ?? 0
            }
            #expect(keys == 4)
            #expect(try await store.register(Self.registration(Self.apns(5))) == .alreadyMember)
            #expect(try await store.register(Self.registration(Self.apns(5), group: "h")) == .joinedGroup)

            let dead = DeviceInvalidation(token: Self.apns(6), reason: .unregistered, appleTimestamp: nil)
            #expect(try await store.invalidate(app: Self.app, dead, at: Self.start) == .invalidated)
            #expect(try await store.removeDevice(app: "other", token: Self.fcm(7)))
            #expect(try await store.unassign(app: Self.app, token: Self.apns(5), group: "h"))
            for app in [Self.app, "other"] {
                for token in tokens {
                    let device = try await store.device(app: app, token: token)
                    if app == "other" && token == Self.fcm(7) {
                        #expect(device == nil, "the removed device only")
                        continue
                    }
                    let found = try #require(device, "\(app) \(token)")
                    #expect(found.token == token)
                    #expect(found.state == (app == Self.app && token == Self.apns(6) ? .invalid : .valid))
                    #expect(found.groups == ["g"], "\(app) \(token)")
                }
            }
            #expect(try await store.device(app: Self.app, token: Self.apns(101)) == nil, "unknown, same keys")
            #expect(try await store.register(Self.registration(Self.apns(6))) == .revalidated)
        }
    }

    /// A file of an earlier schema (v5: the release before; v6: with the skipped targets' triggers) with
    /// devices of both platforms and two apps: opened by this one, the table is rebuilt with keys, v6's
    /// triggers are there again, and everything is found and registers idempotently.
    @Test(arguments: [v5, v6], [TokenKey.standard, TokenKey(bits: 0)])
    func anEarlierFileWithDevicesMigrates(from version: String, tokenKey: TokenKey) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-old-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("pushgate.sqlite").path
        let tokens = (1...500).map(Self.apns) + (1...20).map(Self.fcm)
        do {
            let queue = try DatabaseQueue(path: path)
            try SQLiteSchema.migrator().migrate(queue, upTo: version)
            try await queue.write { db in
                for (app, group) in [(Self.app, "g"), ("other", "o")] {
                    try db.execute(
                        sql: "INSERT INTO device_group (app, name, created_at) VALUES (?, ?, 1)",
                        arguments: [app, group]
                    )
                    let groupID = db.lastInsertedRowID
                    for token in tokens {
                        try db.execute(
                            sql: """
                                INSERT INTO device (app, token, state, registered_at, last_registered_at)
                                VALUES (?, ?, 0, 1, 1)
                                """,
                            arguments: [app, token.storageKey]
                        )
                        try db.execute(
                            sql: "INSERT INTO membership (group_id, device_id) VALUES (?, ?)",
                            arguments: [groupID, db.lastInsertedRowID]
                        )
                    }
                }
                try db.execute(
                    sql: "UPDATE device SET state = 1, invalidated_at = 2, invalid_reason = 'Unregistered' WHERE id = 2"
                )
            }
            try queue.close()
        }
        var configuration = SQLiteStore.Configuration()
        configuration.tokenKey = tokenKey
        let store = try SQLiteStore(path: path, configuration: configuration)
        defer { try? store.close() }
        let (applied, triggers, indexes, rows, memberships, violations) = try await store.read { db in
            (
                try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations"),
                try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name"),
                try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list('device')"),
                try Row.fetchAll(db, sql: "SELECT app, token, token_key FROM device ORDER BY id")
                    .map { (app: $0[0] as String, token: $0[1] as String, key: $0[2] as Int64) },
                try Int.fetchOne(db, sql: "SELECT count(*) FROM membership") ?? 0,
                try Row.fetchAll(db, sql: "PRAGMA foreign_key_check").count
            )
        }
        #expect(applied.contains(Self.v7), "v7 ran (and what follows it)")
        // v7 remade v6's two triggers with the table; v10 replaced them with ones that record the platform.
        #expect(triggers == SQLiteSchema.splitByService.suffix(2).sorted(), "the triggers as the last step made them")
        #expect(indexes == ["device_by_token_key"], "the UNIQUE (app, token) index is gone")
        #expect(rows.count == 2 * tokens.count)
        #expect(rows.allSatisfy { $0.key == tokenKey(app: $0.app, storageKey: $0.token) }, "keys backfilled")
        #expect(memberships == 2 * tokens.count)
        #expect(violations == 0)

        for (app, group) in [(Self.app, "g"), ("other", "o")] {
            for token in tokens {
                let device = try #require(try await store.device(app: app, token: token), "\(app) \(token)")
                #expect(device.groups == [group])
                let again = try await store.register(Self.registration(token, app: app, group: group))
                #expect(again == (app == Self.app && token == Self.apns(2) ? .revalidated : .alreadyMember))
            }
        }
        #expect(try await store.register(Self.registration(Self.apns(501))) == .created)
        let page = try await store.devices(app: Self.app, group: "g", after: nil, limit: 1_000)
        #expect(page.devices.count == tokens.count + 1)
    }

    /// An app's FCM devices are a range of the key index (`token_key < 0`), as they were the range
    /// `['fcm:', 'fcm;')` of the text index before v7.
    @Test func anAppsFCMDevicesAreARangeOfTheKeyIndex() async throws {
        try await withTemporaryStore { store in
            let batch =
                (1...30).map { Self.registration(Self.apns($0)) } + (1...10).map { Self.registration(Self.fcm($0)) }
                + (11...15).map { Self.registration(Self.fcm($0), app: "other") }
            _ = try await store.register(batch: batch)
            let (found, plan) = try await store.read { db in
                (
                    try Row.fetchAll(db, sql: TokenKey.fcmDevicesSQL, arguments: [Self.app]).map { $0[1] as String },
                    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + TokenKey.fcmDevicesSQL, arguments: [Self.app])
                        .map { $0["detail"] as String }
                )
            }
            #expect(Set(found) == Set((1...10).map { Self.fcm($0).storageKey }))
            #expect(plan == ["SEARCH device USING INDEX device_by_token_key (token_key<?)"], "\(plan)")
        }
    }

    /// Every lookup of a device by token descends the key index.
    @Test func findingADeviceByTokenUsesTheKeyIndex() async throws {
        try await withTemporaryStore { store in
            let plan = try await store.read { db in
                try Row.fetchAll(
                    db,
                    sql: "EXPLAIN QUERY PLAN SELECT id FROM device WHERE \(SQLiteStore.deviceByToken)",
                    arguments: SQLiteStore.deviceByTokenArguments(app: Self.app, token: Self.apns(1))
                ).map { $0["detail"] as String }
            }
            #expect(plan == ["SEARCH device USING INDEX device_by_token_key (token_key=?)"], "\(plan)")
        }
    }
}
