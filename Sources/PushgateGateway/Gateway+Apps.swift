import Foundation
import PushgateCore

/// The registry as the UDP ingress sees it with a single app: pushd's datagrams, which name no app
/// (``Registration/defaultApp``), mean that app.
struct SingleAppRegistry: DeviceRegistry {
    let base: any DeviceRegistry
    let app: String

    private func resolve(_ name: String) -> String { name == Registration.defaultApp ? app : name }
    private func resolve(_ registration: Registration) -> Registration {
        var registration = registration
        registration.app = resolve(registration.app)
        return registration
    }

    func register(_ registration: Registration) async throws -> RegistrationResult {
        try await base.register(resolve(registration))
    }
    func register(batch: [Registration]) async throws -> [RegistrationResult] {
        try await base.register(batch: batch.map(resolve))
    }
    func unassign(app: String, token: DeviceToken, group: String) async throws -> Bool {
        try await base.unassign(app: resolve(app), token: token, group: group)
    }
    func removeDevice(app: String, token: DeviceToken) async throws -> Bool {
        try await base.removeDevice(app: resolve(app), token: token)
    }
    func device(app: String, token: DeviceToken) async throws -> DeviceRecord? {
        try await base.device(app: resolve(app), token: token)
    }
    func devices(app: String, group: String, after: GroupCursor?, limit: Int) async throws -> GroupPage {
        try await base.devices(app: resolve(app), group: group, after: after, limit: limit)
    }
    func invalidate(app: String, _ invalidation: DeviceInvalidation, at: Date) async throws -> InvalidationResult {
        try await base.invalidate(app: resolve(app), invalidation, at: at)
    }
}

/// The intake as the UDP ingress sees it with a single app (see ``SingleAppRegistry``).
struct SingleAppIntake: NotificationIntake {
    let base: any NotificationIntake
    let app: String

    func submit(_ request: NotificationRequest) async throws -> EnqueueResult {
        try await base.submit(resolve(request))
    }

    func submit(batch requests: [NotificationRequest]) async -> [Result<EnqueueResult, any Error>] {
        await base.submit(batch: requests.map(resolve))
    }

    private func resolve(_ request: NotificationRequest) -> NotificationRequest {
        var request = request
        if request.app == Registration.defaultApp { request.app = app }
        return request
    }
}
