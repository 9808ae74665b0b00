package main

import "github.com/omar-selfplay/omar/loop"

// rewardPlot is the picture of a run's reward per role (loop.RewardPlot).
const rewardPlot = loop.RewardPlot

func plotRun(run *loop.Run) error { return run.PlotReward() }
