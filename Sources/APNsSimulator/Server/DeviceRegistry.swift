import Synchronization

/// Device states set through the control API: unregistered (410 with the time of marking) or bad
/// (400 `BadDeviceToken`).
final class DeviceRegistry: Sendable {
    enum State: Equatable, Sendable {
        case unregistered(timestampMilliseconds: Int64)
        case bad
    }

    private let states = Mutex<[DeviceKey: State]>([:])
    /// Lets the hot path skip the lock while no device has a state (the common benchmark case).
    private let isEmpty = Atomic<Bool>(true)
    /// What the legacy feedback port reports: devices marked unregistered, until read.
    let feedback = LegacyFeedbackList()

    func set(_ state: State?, for token: String) {
        let key = DeviceKey(token)
        let empty = self.states.withLock { states in
            states[key] = state
            return states.isEmpty
        }
        self.isEmpty.store(empty, ordering: .releasing)
        if case .unregistered(let milliseconds) = state {
            self.feedback.deviceStateChanged(token: token, unregisteredAtMilliseconds: milliseconds)
        } else {
            self.feedback.deviceStateChanged(token: token, unregisteredAtMilliseconds: nil)
        }
    }

    func state(of token: String) -> State? {
        if self.isEmpty.load(ordering: .acquiring) { return nil }
        let key = DeviceKey(token)
        return self.states.withLock { $0[key] }
    }

    func removeAll() {
        self.states.withLock { $0.removeAll() }
        self.feedback.removeAll()
        self.isEmpty.store(true, ordering: .releasing)
    }

    /// The rejection for a device in a non-normal state.
    static func rejection(for state: State) -> SimulatedRejection {
        switch state {
        case .unregistered(let timestamp): return SimulatedRejection(.unregistered, timestampMilliseconds: timestamp)
        case .bad: return SimulatedRejection(.badDeviceToken)
        }
    }
}
