# bash completion for podscopectl(1)

_podscopectl_ids() {
    podscopectl list --quiet 2>/dev/null | cut -c1-12
}

_podscopectl_ctr_ids() {
    podscopectl ps -a --quiet 2>/dev/null | cut -c1-12
}

_podscopectl() {
    local cur prev words cword
    _init_completion 2>/dev/null || {
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    }
    local commands="list status create start stop rm wait update info pull images inspecti rmi imagefsinfo container ps inspect logs exec attach help"
    local c=1
    [[ ${words[1]} == --no-ask-password ]] && c=2
    if ((cword == c)); then
        COMPREPLY=($(compgen -W "$commands --no-ask-password --version" -- "$cur"))
        return
    fi
    case ${words[c]} in
        list)
            case $prev in
                --state) COMPREPLY=($(compgen -W "created ready notready" -- "$cur")); return;;
                --label) return;;
            esac
            COMPREPLY=($(compgen -W "--state --label --quiet" -- "$cur"))
            ;;
        status|wait)
            ((cword == c + 1)) && COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            ;;
        update)
            if ((cword == c + 1)); then
                COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            elif [[ $prev != --* ]]; then
                COMPREPLY=($(compgen -W "--memory --cpu-quota --cpu-period --cpu-shares --pids-limit" -- "$cur"))
            fi
            ;;
        start|stop|rm|remove)
            COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            ;;
        create)
            case $prev in
                --pid-namespace) COMPREPLY=($(compgen -W "pod container node" -- "$cur")); return;;
                --log-directory) COMPREPLY=($(compgen -d -- "$cur")); return;;
                --namespace|--uid|--attempt|--hostname|--label|--annotation|--cgroup-parent|\
                --runtime-handler|--memory|--cpu-quota|--cpu-period|--cpu-shares|--pids-limit|\
                --port|--dns-server|--dns-search|--dns-option|--sysctl) return;;
            esac
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--namespace --uid --attempt --hostname
                --host-network --pid-namespace --label --annotation --cgroup-parent
                --log-directory --runtime-handler --memory --cpu-quota --cpu-period
                --cpu-shares --pids-limit --port --dns-server --dns-search --dns-option
                --sysctl --start" -- "$cur"))
            ;;
        ps)
            case $prev in
                --state) COMPREPLY=($(compgen -W "created running exited unknown" -- "$cur")); return;;
                --pod) COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur")); return;;
                --label) return;;
            esac
            COMPREPLY=($(compgen -W "-a --pod --state --label --quiet" -- "$cur"))
            ;;
        inspect)
            ((cword == c + 1)) && COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
            ;;
        logs)
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "-f --follow" -- "$cur")) \
                || COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
            ;;
        exec)
            [[ $prev == --timeout ]] && return
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--timeout -i -t" -- "$cur"))
            elif [[ $prev == exec || $prev == -i || $prev == -t || $prev == -it || $prev =~ ^[0-9]+$ ]]; then
                COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
            fi
            ;;
        attach)
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "-i" -- "$cur")) \
                || COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
            ;;
        container)
            if ((cword == c + 1)); then
                COMPREPLY=($(compgen -W "create start stop rm update" -- "$cur"))
                return
            fi
            case ${words[c+1]} in
                create)
                    case $prev in
                        --mount|--log-path|--workdir) COMPREPLY=($(compgen -f -- "$cur")); return;;
                        --env|--user|--label|--cap-add|--cap-drop|--memory|--cpu-quota|\
                        --cpu-period|--cpu-shares|--cpuset-cpus|--attempt) return;;
                    esac
                    if [[ $cur == -* ]]; then
                        COMPREPLY=($(compgen -W "--env --workdir --user --mount --label --log-path
                            --privileged --read-only --cap-add --cap-drop --tty --stdin --memory
                            --cpu-quota --cpu-period --cpu-shares --cpuset-cpus --attempt --start" -- "$cur"))
                    elif ((cword == c + 2)); then
                        COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
                    fi
                    ;;
                update)
                    if ((cword == c + 2)); then
                        COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
                    elif [[ $prev != --* ]]; then
                        COMPREPLY=($(compgen -W "--memory --cpu-quota --cpu-period --cpu-shares --cpuset-cpus" -- "$cur"))
                    fi
                    ;;
                stop)
                    [[ $prev == -t || $prev == --timeout ]] && return
                    COMPREPLY=($(compgen -W "-t $(_podscopectl_ctr_ids)" -- "$cur"))
                    ;;
                start|rm)
                    COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
                    ;;
            esac
            ;;
    esac
}
complete -F _podscopectl podscopectl
