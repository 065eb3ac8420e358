"""``gnnwb advise``: the best strategy combination for a graph and a cluster, found by simulation.

* :mod:`studies.advisor.space`: the candidates (scheme x partitioner x placement and cache
  capacity x memory policy x batch size), built from the registries and the user's restrictions;
* :mod:`studies.advisor.estimate`: an epoch's time from a prefix of its iterations, with an interval;
* :mod:`studies.advisor.search`: successive halving over prefixes (and exhaustive search, to check it);
* :mod:`studies.advisor.report`: the ranking, the Pareto front, the breakdown, the winner's timeline;
* :mod:`studies.advisor.confirm`: the top candidates run for real, predicted beside measured.

It lives in ``studies`` because it uses both executors (the simulator to search, real
execution to confirm), and ``studies`` is the lowest layer that may.
"""
