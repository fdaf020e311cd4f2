#include "gateway/routing_policy.h"

#include <algorithm>

namespace nexus::gateway {

std::optional<PolicyKind> policy_from_name(const std::string& name) {
  if (name == "least-load") return PolicyKind::LeastLoad;
  if (name == "prefix") return PolicyKind::Prefix;
  if (name == "round-robin") return PolicyKind::RoundRobin;
  return std::nullopt;
}

const char* policy_name(PolicyKind p) {
  switch (p) {
    case PolicyKind::LeastLoad: return "least-load";
    case PolicyKind::Prefix: return "prefix";
    case PolicyKind::RoundRobin: return "round-robin";
  }
  return "?";
}

const char* affinity_result_name(AffinityResult r) {
  switch (r) {
    case AffinityResult::None: return "none";
    case AffinityResult::Hit: return "hit";
    case AffinityResult::Miss: return "miss";
    case AffinityResult::Overflow: return "overflow";
  }
  return "?";
}

size_t Router::two_choices(const std::vector<Candidate>& c) {
  if (c.size() == 1) return 0;
  size_t a, b;
  {
    std::lock_guard lock(rng_mu_);
    a = std::uniform_int_distribution<size_t>(0, c.size() - 1)(rng_);
    b = std::uniform_int_distribution<size_t>(0, c.size() - 2)(rng_);
  }
  if (b >= a) ++b;  // distinct from a
  if (c[a].score != c[b].score) return c[a].score < c[b].score ? a : b;
  return a;  // a tie: a is as random as b
}

size_t Router::fewest_prefixes(const std::vector<Candidate>& c, double min_score) {
  const Candidate* best = nullptr;
  int64_t best_owned = 0;
  for (const Candidate& x : c) {
    if (x.score > min_score + 1) continue;
    const int64_t owned = affinity_.owned(x.replica);
    if (!best || owned < best_owned || (owned == best_owned && x.score < best->score)) {
      best = &x;
      best_owned = owned;
    }
  }
  return best->replica;  // the least-loaded candidate always qualifies
}

RouteDecision Router::choose(const std::vector<Candidate>& c, const std::vector<uint64_t>& prefix_hashes) {
  switch (policy_) {
    case PolicyKind::RoundRobin:
      return {c[next_.fetch_add(1, std::memory_order_relaxed) % c.size()].replica};
    case PolicyKind::LeastLoad:
      return {c[two_choices(c)].replica};
    case PolicyKind::Prefix: {
      const double min_score =
          std::min_element(c.begin(), c.end(), [](auto& x, auto& y) { return x.score < y.score; })->score;
      if (prefix_hashes.empty()) return {c[two_choices(c)].replica, AffinityResult::Miss};
      AffinityResult result = AffinityResult::Miss;
      if (auto m = affinity_.lookup(prefix_hashes)) {
        auto it = std::find_if(c.begin(), c.end(), [&](const Candidate& x) { return x.replica == m->replica; });
        if (it != c.end() && it->score <= min_score + prefix_threshold_) return {it->replica, AffinityResult::Hit};
        result = AffinityResult::Overflow;  // its replica is busy, gone or already tried
      }
      // (An overflowed replica is more than the threshold, >= 1 in
      // practice, above the least load: fewest_prefixes skips it.)
      const size_t chosen = fewest_prefixes(c, min_score);
      affinity_.record(prefix_hashes, chosen);
      return {chosen, result};
    }
  }
  return {c.front().replica};
}

}  // namespace nexus::gateway
